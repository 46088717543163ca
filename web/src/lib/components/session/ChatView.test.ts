import { fireEvent, render, screen } from '@testing-library/svelte';
import { tick } from 'svelte';
import { describe, expect, it, vi } from 'vitest';
import ChatView from './ChatView.svelte';
import { toItems } from './chatItems';
import { ev, input, err } from '$lib/test/fixtures';

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

describe('ChatView', () => {
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

	it('follows new records while at the bottom', async () => {
		const recs = [ev('n', { type: 'text', content: 'a' })];
		const { rerender } = render(ChatView, { records: recs });
		const el = screen.getByTestId('chat-scroll');
		const h = { v: 1000 };
		fakeScroll(el, h);
		el.scrollTop = 800; // at bottom
		await fireEvent.scroll(el);
		h.v = 1400;
		await rerender({ records: [...recs, ev('n', { type: 'text', content: 'b' })] });
		await tick();
		expect(el.scrollTop).toBe(1200);
		expect(screen.queryByText(/new messages/)).toBeNull();
	});

	it('does not yank a reader who scrolled up; offers a button instead', async () => {
		const recs = [ev('n', { type: 'text', content: 'a' })];
		const { rerender } = render(ChatView, { records: recs });
		const el = screen.getByTestId('chat-scroll');
		const h = { v: 1000 };
		fakeScroll(el, h);
		el.scrollTop = 100; // reading history
		await fireEvent.scroll(el);
		h.v = 1400;
		await rerender({ records: [...recs, ev('n', { type: 'text', content: 'b' })] });
		await tick();
		expect(el.scrollTop).toBe(100);
		const btn = screen.getByRole('button', { name: /new messages/ });
		await fireEvent.click(btn);
		expect(el.scrollTop).toBe(1200);
		expect(screen.queryByRole('button', { name: /new messages/ })).toBeNull();
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
});
