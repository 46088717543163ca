import { fireEvent, render, screen } from '@testing-library/svelte';
import { tick } from 'svelte';
import { describe, expect, it, vi } from 'vitest';
import ChatView from './ChatView.svelte';
import { toItems } from './chatItems';
import { ev, input, err, sys, fileRec } from '$lib/test/fixtures';
import type { LogRecord } from '$lib/types';
import { injectStyles } from '$lib/test/css';

// Two generations of one node: the first hands off, the second starts with its health checks and
// memories; a commit links to the command it was made during.
function twoGenerations(): LogRecord[] {
	return [
		input('n', { type: 'message', from: 'user', content: 'write the parser' }, 1),
		ev('n', { type: 'text', content: 'generation one at work' }, 2),
		ev('n', { type: 'command', cmd: 'git commit -am parser', status: 'start' }, 3),
		ev('n', { type: 'tool', name: 'read', status: 'done' }, 4),
		ev('n', { type: 'command', cmd: 'git commit -am parser', status: 'done', exit: 0 }, 5),
		{ ...ev('n', { type: 'commit', hash: 'c0ffee12', message: 'parser' }, 6), ref: 5 } as LogRecord,
		ev('n', { type: 'handoff', summary: 'lists work, maps are next' }, 7),
		input('n', { type: 'signal', action: 'stop' }, 8),
		sys('n', { type: 'continuation', text: 'continuation: generation 2', generation: 2, summary: 'lists work, maps are next' }, 9),
		ev('n', { type: 'commit', hash: 'deadbeef', message: 'filepath: rescue uncommitted work' }, 10),
		sys('n', { type: 'check', text: 'go vet ./... failed with exit code 1 after 2s', command: 'go vet ./...', exit: 1, output: './a.go:3: bad format', duration_ms: 2100 }, 11),
		sys('n', { type: 'check', text: 'go build passed', command: 'go build -o /dev/null ./...', exit: 0, duration_ms: 800 }, 12),
		sys('n', { type: 'check', text: 'sleep 60 timed out', command: 'sleep 60', timed_out: true, duration_ms: 1000 }, 13),
		sys('n', { type: 'memory', text: '1 memory given to the agent', memories: [{ key: 'grammar', text: 'lives in parse.y' }] }, 14),
		input('n', { type: 'message', from: 'system', content: 'This agent continues…' }, 15),
		ev('n', { type: 'text', content: 'generation two at work' }, 16)
	];
}

function allTypes() {
	return [
		input('n', { type: 'message', from: 'user', content: 'do `it`' }),
		input('n', { type: 'message', from: 'parent', content: 'from the parent' }),
		ev('n', { type: 'status', state: 'running' }),
		ev('n', { type: 'text', content: 'working on `main.go`' }),
		ev('n', { type: 'tool', name: 'read_file', path: 'main.go', status: 'start' }),
		ev('n', { type: 'tool', name: 'read_file', path: 'main.go', status: 'done', output: 'package main' }),
		ev('n', { type: 'command', cmd: 'go test', status: 'done', exit: 0, stdout: 'ok' }),
		ev('n', { type: 'commit', hash: 'aaaaaaa1', message: 'one' }),
		ev('n', { type: 'commit', hash: 'bbbbbbb2', message: 'two' }),
		ev('n', { type: 'spawn', name: 'child', agent: 'codex', model: 'gpt-5', task: 'write tests' }),
		ev('n', { type: 'workers', workers: [{ name: 'child', status: 'thinking' }] }),
		ev('n', { type: 'handoff', summary: 'context full, next picks up at step 3' }),
		err('n', { message: 'line 9 is not a valid event: missing field "content"', raw: '{"type":"text"}', source: 'stdout' }),
		ev('n', { type: 'done', summary: 'all green' })
	];
}

describe('chatItems', () => {
	it('drops status, groups commits, merges tool start+done', () => {
		const kinds = toItems(allTypes()).map((i) => i.kind);
		expect(kinds).toEqual(['user', 'note', 'text', 'tool', 'command', 'commits', 'spawn', 'workers', 'handoff', 'error', 'done']);
		const commits = toItems(allTypes()).find((i) => i.kind === 'commits');
		expect(commits && commits.kind === 'commits' && commits.commits.length).toBe(2);
		const tool = toItems(allTypes()).find((i) => i.kind === 'tool');
		expect(tool && tool.kind === 'tool' && tool.ev.status).toBe('done');
	});
});

describe('chatItems of system records', () => {
	it('makes a divider, check and memory blocks, and links a commit to its command', () => {
		const items = toItems(twoGenerations());
		expect(items.map((i) => i.kind)).toEqual([
			'user', 'text', 'command', 'tool', 'commits', 'handoff', 'note', 'continuation', 'commits', 'check', 'check', 'check', 'memory', 'note', 'text'
		]);
		const linked = items.find((i) => i.kind === 'commits');
		// the commit refers to the command's done record (5); the block's key is its start's (3)
		expect(linked && linked.kind === 'commits' && linked.commits[0].target).toBe(3);
		const rescue = items.filter((i) => i.kind === 'commits')[1];
		expect(rescue.kind === 'commits' && rescue.commits[0].target).toBeUndefined();
		const cont = items.find((i) => i.kind === 'continuation');
		expect(cont && cont.kind === 'continuation' && cont.generation).toBe(2);
	});
});

describe('ChatView', () => {
	it('shows both generations in one chat: the handoff, the continuation divider, checks, memories', () => {
		const { container } = render(ChatView, { records: twoGenerations() });
		const text = container.textContent!;
		expect(text.indexOf('generation one at work')).toBeLessThan(text.indexOf('lists work, maps are next'));
		expect(text.indexOf('lists work, maps are next')).toBeLessThan(text.indexOf('continuation 1'));
		expect(text.indexOf('continuation 1')).toBeLessThan(text.indexOf('generation two at work'));
		const divider = screen.getByRole('separator');
		expect(divider.textContent!.trim()).toBe('continuation 1');
		expect(divider.getAttribute('title')).toMatch(/Generation 2/);
		const checks = [...container.querySelectorAll('[data-testid="check"]')];
		expect(checks.map((c) => c.getAttribute('data-result'))).toEqual(['failed', 'passed', 'timed-out']);
		expect(checks[0].textContent).toMatch(/go vet \.\/\.\.\..*exit 1.*2\.1s/s);
		expect(checks[2].textContent).toMatch(/timed out/);
		expect(container.querySelector('[data-testid="memory"]')!.textContent).toMatch(/grammar\s+lives in parse\.y/);
	});

	it('shows a failing check\'s output when opened', async () => {
		const { container } = render(ChatView, { records: twoGenerations() });
		const head = container.querySelector('[data-testid="check"] button')!;
		await fireEvent.click(head);
		expect(container.querySelector('[data-testid="check"] pre')!.textContent).toBe('./a.go:3: bad format');
	});

	it('says so when no check was found', () => {
		render(ChatView, { records: [sys('n', { type: 'check', text: 'No health checks: none are set on the session and none were detected' }, 5)] });
		expect(screen.getByText(/No health checks/)).toBeTruthy();
	});

	it('takes a commit back to the command it was made during', async () => {
		const { container } = render(ChatView, { records: twoGenerations() });
		const links = container.querySelectorAll('[data-testid="commit-link"]');
		expect(links).toHaveLength(1); // the rescue commit links to nothing
		const target = container.querySelector<HTMLElement>('[data-key="3"]')!;
		target.scrollIntoView = vi.fn();
		await fireEvent.click(links[0]);
		expect(target.scrollIntoView).toHaveBeenCalled();
		expect(target.classList.contains('flash')).toBe(true);
		expect(target.getAttribute('data-kind')).toBe('command');
	});

	it('shows the empty state without records', () => {
		render(ChatView, { records: [] });
		expect(screen.getByText('Send a message to activate this agent')).toBeTruthy();
	});

	it('renders every message type; status is not a message', async () => {
		const onselectworker = vi.fn();
		const { container } = render(ChatView, { records: allTypes(), onselectworker });
		expect(container.querySelector('[data-kind="user"] code')!.textContent).toBe('it');
		expect(screen.getByText('from the parent')).toBeTruthy();
		expect(container.querySelector('[data-kind="text"] code')!.textContent).toBe('main.go');
		expect(screen.getByText('read_file')).toBeTruthy();
		expect(screen.getByText('go test')).toBeTruthy();
		expect(screen.getByText('2 commits')).toBeTruthy();
		expect(screen.getByText('write tests')).toBeTruthy();
		expect(screen.getByText(/context full/)).toBeTruthy();
		expect(screen.getByText(/missing field "content"/)).toBeTruthy();
		expect(container.querySelector('[data-kind="error"] pre')!.textContent).toBe('{"type":"text"}');
		expect(screen.getByText(/all green/)).toBeTruthy();
		expect(container.querySelector('[data-kind="done"]')!.textContent!.trim()).toBe('done — all green');
		expect(container.querySelectorAll('[data-kind="status"]')).toHaveLength(0);
		expect(container.textContent).not.toContain('running');
		// worker pill and spawn link select by name
		const pills = container.querySelectorAll('[data-kind="workers"] button');
		await fireEvent.click(pills[0]);
		expect(onselectworker).toHaveBeenCalledWith('child');
	});

	it('shows the typing indicator while thinking or running', async () => {
		const { rerender } = render(ChatView, { records: [], status: 'thinking' });
		expect(screen.getByRole('status', { name: /working/i })).toBeTruthy();
		await rerender({ status: 'done' });
		expect(screen.queryByRole('status', { name: /working/i })).toBeNull();
	});

	function fakeScroll(el: HTMLElement, height: { v: number }) {
		let top = 0;
		Object.defineProperty(el, 'scrollHeight', { configurable: true, get: () => height.v });
		Object.defineProperty(el, 'clientHeight', { configurable: true, get: () => 200 });
		Object.defineProperty(el, 'scrollTop', { configurable: true, get: () => top, set: (v) => (top = Math.min(v, height.v - 200)) });
	}

	// grownWhileAt renders a record, scrolls the chat (1000 px high) to top, then
	// adds a record that makes it 1400 px high.
	async function grownWhileAt(top: number) {
		const recs = [ev('n', { type: 'text', content: 'a' })];
		const { rerender } = render(ChatView, { records: recs });
		const el = screen.getByTestId('chat-scroll');
		const h = { v: 1000 };
		fakeScroll(el, h);
		el.scrollTop = top;
		await fireEvent.scroll(el);
		h.v = 1400;
		await rerender({ records: [...recs, ev('n', { type: 'text', content: 'b' })] });
		await tick();
		return el;
	}

	it('follows new records while at the bottom', async () => {
		const el = await grownWhileAt(800); // at bottom
		expect(el.scrollTop).toBe(1200);
		expect(screen.queryByText(/new messages/)).toBeNull();
	});

	it('does not yank a reader who scrolled up; offers a button instead', async () => {
		const el = await grownWhileAt(100); // reading history
		expect(el.scrollTop).toBe(100);
		const btn = screen.getByRole('button', { name: /new messages/ });
		await fireEvent.click(btn);
		expect(el.scrollTop).toBe(1200);
		expect(screen.queryByRole('button', { name: /new messages/ })).toBeNull();
	});

	it('issue 27.4: a spawn without a model shows no empty model pill', () => {
		const { container } = render(ChatView, { records: [ev('n', { type: 'spawn', name: 'kid', agent: 'custom', model: '' })] });
		const tags = [...container.querySelectorAll('[data-kind="spawn"] .tag')].map((e) => e.textContent);
		expect(tags).toEqual(['custom']);
	});

	it('issue 27.8: the final reply is not printed twice (its done says only done)', () => {
		const { container } = render(ChatView, {
			records: [
				input('n', { type: 'message', from: 'user', content: 'are you there?' }),
				ev('n', { type: 'text', content: 'Yes: the note is written and committed.' }),
				ev('n', { type: 'status', state: 'idle' }),
				ev('n', { type: 'done', summary: 'Yes: the note is written and committed.\n' })
			]
		});
		expect(screen.getAllByText(/the note is written and committed/)).toHaveLength(1);
		expect(container.querySelector('[data-kind="done"]')!.textContent!.trim()).toBe('done');
	});

	it('issue 27.8: a done whose summary says something new keeps it', () => {
		const { container } = render(ChatView, {
			records: [ev('n', { type: 'text', content: 'working on it' }), ev('n', { type: 'done', summary: 'wrote notes/hello.md' })]
		});
		expect(container.querySelector('[data-kind="done"]')!.textContent!.trim()).toBe('done — wrote notes/hello.md');
	});

	it("issue 27.6: the done line's icon stays beside its text (the line does not wrap the icon away)", () => {
		const remove = injectStyles('src/lib/components/session/ChatView.svelte');
		try {
			const { container } = render(ChatView, { records: [ev('n', { type: 'done', summary: 'x'.repeat(500) })] });
			const line = container.querySelector('[data-kind="done"] .event') as HTMLElement;
			expect(getComputedStyle(line).flexWrap).toBe('nowrap');
			const text = line.querySelector(':scope > span') as HTMLElement;
			expect(getComputedStyle(text).minWidth).toBe('0px');
		} finally {
			remove();
		}
	});

	it('issue 27.6: a reader at the bottom stays there when the view shrinks (the composer grows)', async () => {
		let observed: (() => void) | undefined;
		class RO {
			constructor(cb: () => void) {
				observed = cb;
			}
			observe() {}
			disconnect() {}
		}
		vi.stubGlobal('ResizeObserver', RO);
		try {
			const recs = [ev('n', { type: 'text', content: 'a' })];
			render(ChatView, { records: recs });
			const el = screen.getByTestId('chat-scroll');
			const h = { v: 1000 };
			fakeScroll(el, h);
			el.scrollTop = 800;
			await fireEvent.scroll(el);
			h.v = 1032; // 32 px less room, no scroll event
			observed?.();
			expect(el.scrollTop).toBe(832);
		} finally {
			vi.unstubAllGlobals();
		}
	});

	it('mounts only the newest 200 items and pages in earlier ones', async () => {
		const recs = Array.from({ length: 650 }, (_, i) => ev('n', { type: 'text', content: `m${i}` }, i + 1));
		const { container } = render(ChatView, { records: recs });
		expect(container.querySelectorAll('.list > .item')).toHaveLength(200);
		expect(screen.getByText('m649')).toBeTruthy();
		expect(screen.queryByText('m449')).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: 'Show earlier (450 more)' }));
		expect(container.querySelectorAll('.list > .item')).toHaveLength(600);
		await fireEvent.click(screen.getByRole('button', { name: 'Show earlier (50 more)' }));
		expect(container.querySelectorAll('.list > .item')).toHaveLength(650);
		expect(screen.queryByRole('button', { name: /show earlier/i })).toBeNull();
	});

	it("shows a user's attachments as chips without the list filepath adds for the agent, and the agent's files as cards", async () => {
		const recs = [
			input('n', {
				type: 'message',
				from: 'user',
				content: 'Sum column B\n\nAttached file (in your workspace):\n- /workspace/uploads/sales.xlsx (6.1 KB, application/vnd.openxmlformats-officedocument.spreadsheetml.sheet)',
				attachments: [{ path: '/uploads/sales.xlsx', size_bytes: 6100, mime_type: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet' }]
			}),
			ev('n', { type: 'text', content: 'Reading it.' }),
			fileRec('n', { op: 'created', path: '/out/sum.csv', size: 10 }),
			fileRec('n', { op: 'modified', path: '/out/sum.csv', size: 12 }),
			fileRec('n', { op: 'created', path: '/.git/objects/ab/cdef', size: 80 }),
			fileRec('n', { op: 'modified', path: '/uploads/sales.xlsx', size: 6200 }),
			fileRec('n', { op: 'created', path: '/plot.png', size: 2048 }),
			fileRec('n', { op: 'deleted', path: '/tmp.txt', size: 0 })
		];
		render(ChatView, { records: recs, fileURL: (p: string) => '/dl' + p, thumbURL: (p: string) => '/thumb' + p });
		const user = document.querySelector('[data-kind="user"]') as HTMLElement;
		expect(user.textContent).toContain('Sum column B');
		expect(user.textContent).not.toContain('Attached file');
		const chip = screen.getByTestId('attached-file');
		expect(chip.textContent).toContain('sales.xlsx');
		expect(chip.querySelector('a')?.getAttribute('href')).toBe('/dl/uploads/sales.xlsx');

		const cards = screen.getAllByTestId('file-card');
		expect(cards.map((c) => c.querySelector('.name')?.textContent)).toEqual(['sum.csv', 'sales.xlsx', 'plot.png', 'tmp.txt']);
		expect(cards[0].textContent).toContain('new · CSV table · 12 B'); // created, then changed: new, at its last size
		expect(cards[0].textContent).toContain('in /out');
		expect(cards[1].textContent).toContain('changed · Excel workbook');
		expect(cards[1].textContent).toContain('in /uploads');
		expect(cards[1].querySelector('a')?.getAttribute('href')).toBe('/dl/uploads/sales.xlsx');
		expect(cards[2].querySelector('img')?.getAttribute('src')).toBe('/thumb/plot.png');
		expect(cards[3].querySelector('a')).toBeNull(); // deleted: nothing to download
		expect(document.body.textContent).not.toContain('cdef'); // git's own files are not cards
	});

	it('a long run of files shows six cards and the rest on request', async () => {
		const recs = Array.from({ length: 9 }, (_, i) => fileRec('n', { op: 'created', path: `/gen/f${i}.txt`, size: i }));
		render(ChatView, { records: recs });
		expect(screen.getAllByTestId('file-card')).toHaveLength(6);
		await fireEvent.click(screen.getByRole('button', { name: 'and 3 more files' }));
		expect(screen.getAllByTestId('file-card')).toHaveLength(9);
	});
});
