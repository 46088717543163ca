import { fireEvent, render, screen } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import TextMessage from './TextMessage.svelte';
import ToolBlock from './ToolBlock.svelte';
import CommandBlock from './CommandBlock.svelte';
import WorkerPills from './WorkerPills.svelte';
import CommitLog from './CommitLog.svelte';
import TypingIndicator from './TypingIndicator.svelte';
import { splitInline } from './inline';

describe('TextMessage', () => {
	it('renders inline code as <code>', () => {
		const { container } = render(TextMessage, { content: 'run `go test` now' });
		const code = container.querySelector('code')!;
		expect(code.textContent).toBe('go test');
		expect(container.textContent).toContain('run go test now');
	});
	it('user messages are right-aligned bubbles, agent messages are not', () => {
		const user = render(TextMessage, { content: 'hi', role: 'user' });
		expect(user.container.querySelector('.msg')!.classList.contains('user')).toBe(true);
		user.unmount();
		const agent = render(TextMessage, { content: 'hello' });
		expect(agent.container.querySelector('.msg')!.classList.contains('agent')).toBe(true);
	});
	it('notes show who they are from', () => {
		render(TextMessage, { content: 'health ok', role: 'note', from: 'system' });
		expect(screen.getByText('system')).toBeTruthy();
	});
	const split = [
		{ name: 'plain', in: 'abc', want: [{ code: false, text: 'abc' }] },
		{ name: 'one span', in: 'a `b` c', want: [{ code: false, text: 'a ' }, { code: true, text: 'b' }, { code: false, text: ' c' }] },
		{ name: 'unmatched stays literal', in: 'a `b', want: [{ code: false, text: 'a `b' }] },
		{ name: 'two spans', in: '`x``y`', want: [{ code: true, text: 'x' }, { code: true, text: 'y' }] }
	];
	for (const c of split) it(`splitInline: ${c.name}`, () => expect(splitInline(c.in)).toEqual(c.want));
});

describe('ToolBlock', () => {
	it('renders collapsed, click expands and shows output', async () => {
		render(ToolBlock, { name: 'read_file', path: 'a/b.go', status: 'done', output: 'package main' });
		expect(screen.getByText('read_file')).toBeTruthy();
		expect(screen.getByText('a/b.go')).toBeTruthy();
		expect(screen.queryByText('package main')).toBeNull();
		const head = screen.getByRole('button');
		expect(head.getAttribute('aria-expanded')).toBe('false');
		await fireEvent.click(head);
		expect(screen.getByText('package main')).toBeTruthy();
		await fireEvent.click(head);
		expect(screen.queryByText('package main')).toBeNull();
	});
});

describe('CommandBlock', () => {
	it('shows the exit code; expands to stdout and stderr', async () => {
		const { container } = render(CommandBlock, { cmd: 'go vet', status: 'error', exit: 1, stdout: 'out', stderr: 'bad thing' });
		expect(screen.getByText('go vet', { selector: '.cmd' })).toBeTruthy();
		expect(screen.getByText('exit 1').classList.contains('failed')).toBe(true);
		expect(container.querySelector('.stderr')).toBeNull();
		await fireEvent.click(screen.getByRole('button'));
		expect(screen.getByText('out')).toBeTruthy();
		expect(container.querySelector('.stderr')!.textContent).toBe('bad thing');
	});
	it('exit 0 is not marked failed', () => {
		render(CommandBlock, { cmd: 'true', status: 'done', exit: 0 });
		expect(screen.getByText('exit 0').classList.contains('failed')).toBe(false);
	});
	it("issue 27.8: beside the exit code, stderr's last line when there is one (a pipe into head exits 0)", () => {
		render(CommandBlock, { cmd: 'nosuchcmd | head -5', status: 'done', exit: 0, stderr: 'sh: 1: nosuchcmd: not found\n' });
		const line = screen.getByText('sh: 1: nosuchcmd: not found', { selector: '.errline' });
		expect(line.title).toBe('the last line of stderr');
		expect(screen.getByText('exit 0')).toBeTruthy();
	});
	it('issue 27.8: a long command is cut in the header and whole once expanded', async () => {
		const cmd = 'find / -name "*.go" -not -path "*/vendor/*" -exec grep -l "func main" {} + ' + 'x'.repeat(300);
		render(CommandBlock, { cmd, status: 'done', exit: 0 });
		expect(screen.getByText(cmd, { selector: '.cmd' }).title).toBe(cmd);
		expect(screen.queryByTestId('full-command')).toBeNull();
		await fireEvent.click(screen.getByRole('button'));
		expect(screen.getByTestId('full-command').textContent).toBe('$ ' + cmd);
	});
});

describe('WorkerPills', () => {
	it('renders pills with status colours and fires the callback with the name', async () => {
		const onselect = vi.fn();
		const { container } = render(WorkerPills, {
			workers: [
				{ name: 'db', status: 'done' },
				{ name: 'api', status: 'running' },
				{ name: 'jwt', status: 'error' }
			],
			onselect
		});
		const dots = [...container.querySelectorAll('.dot')] as HTMLElement[];
		expect(dots.map((d) => d.style.color)).toEqual(['var(--status-done)', 'var(--status-running)', 'var(--status-error)']);
		expect(dots[1].classList.contains('pulse')).toBe(true);
		await fireEvent.click(screen.getByText('api'));
		expect(onselect).toHaveBeenCalledWith('api');
	});
});

describe('CommitLog', () => {
	it('renders a count header and rows with an accent short hash', () => {
		const { container } = render(CommitLog, {
			commits: [
				{ hash: '3f9a1c27e0b1', message: 'first' },
				{ hash: 'b81e0d4411aa', message: 'second' }
			]
		});
		expect(screen.getByText('2 commits')).toBeTruthy();
		const hashes = [...container.querySelectorAll('.hash')] as HTMLElement[];
		expect(hashes.map((h) => h.textContent)).toEqual(['3f9a1c2', 'b81e0d4']);
		expect(hashes[0].style.color).toBe('var(--accent)');
		expect(screen.getByText('second')).toBeTruthy();
	});
});

describe('TypingIndicator', () => {
	it('shows three staggered animated dots', () => {
		const { container } = render(TypingIndicator);
		const dots = [...container.querySelectorAll('.d')] as HTMLElement[];
		expect(dots).toHaveLength(3);
		expect(dots.map((d) => d.style.animationDelay)).toEqual(['0s', '0.16s', '0.32s']);
		expect(screen.getByRole('status')).toBeTruthy();
	});
});
