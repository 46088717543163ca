import { fireEvent, render, screen, within } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import AgentPanel, { formatTokens } from './AgentPanel.svelte';
import { ev, node } from '$lib/test/fixtures';
import { injectStyles } from '$lib/test/css';

describe('AgentPanel', () => {
	const a = node('a', null, 'alpha', 'running', { agent_type: 'claude-code', model: 'claude-sonnet-4', tokens: 48213 });
	const b = node('b', 'a', 'beta', 'error', { agent_type: 'codex', model: 'gpt-5', tokens: 12 });

	it('shows the header info of the node', () => {
		render(AgentPanel, { node: a, records: [], onsend: vi.fn() });
		expect(screen.getByRole('heading', { name: 'alpha' })).toBeTruthy();
		const label = screen.getByTestId('status-label');
		expect(label.textContent).toBe('Running');
		expect(label.style.color).toBe('var(--status-running)');
		expect(screen.getByTestId('agent-tag').textContent).toBe('claude-code');
		expect(screen.getByTestId('model-tag').textContent).toBe('claude-sonnet-4');
		expect(screen.getByTestId('tokens').textContent).toBe('48k tokens');
	});

	it('an agent on its vendor\'s service says its usage is not metered', () => {
		const amp = node('m', null, 'ampy', 'running', { agent_type: 'amp', model: 'claude-sonnet-4', tokens: 0 });
		render(AgentPanel, { node: amp, records: [], onsend: vi.fn(), unmetered: true });
		expect(screen.getByTestId('tokens').textContent!.trim()).toBe('usage not metered by filepath');
	});

	it('a parent\'s header adds up its subtree; a continued agent shows its generation', async () => {
		const { rerender } = render(AgentPanel, { node: a, records: [], onsend: vi.fn(), rollup: { tokens: 60_000, done: 2, total: 3, children: 2 } });
		expect(screen.getByTestId('subtree').textContent).toBe('· subtree 60k tokens · 2/3 done');
		await rerender({ rollup: { tokens: 0, done: 1, total: 3, children: 2 } });
		expect(screen.getByTestId('subtree').textContent).toBe('· 1/3 done');
		expect(screen.queryByTestId('generation')).toBeNull();
		await rerender({ node: { ...a, generation: 3 }, rollup: { tokens: 12, done: 0, total: 1, children: 0 } });
		expect(screen.queryByTestId('subtree')).toBeNull();
		expect(screen.getByTestId('generation').textContent!.trim()).toBe('generation 3');
	});

	it('switching nodes switches header and chat', async () => {
		const { rerender } = render(AgentPanel, {
			node: a,
			records: [ev('a', { type: 'text', content: 'alpha says hi' })],
			onsend: vi.fn()
		});
		expect(screen.getByText('alpha says hi')).toBeTruthy();
		await rerender({ node: b, records: [ev('b', { type: 'text', content: 'beta here' })] });
		expect(screen.getByRole('heading', { name: 'beta' })).toBeTruthy();
		expect(screen.getByTestId('status-label').textContent).toBe('Error');
		expect(screen.queryByText('alpha says hi')).toBeNull();
		expect(screen.getByText('beta here')).toBeTruthy();
	});

	it('sends to the shown node', async () => {
		const onsend = vi.fn().mockResolvedValue(undefined);
		render(AgentPanel, { node: b, records: [], onsend });
		const area = screen.getByLabelText('Message');
		await fireEvent.input(area, { target: { value: 'go' } });
		await fireEvent.keyDown(area, { key: 'Enter' });
		expect(onsend).toHaveBeenCalledWith('b', 'go', []);
	});

	it('the Log toggle shows stderr, or a readable error', async () => {
		const loadLogs = vi.fn().mockResolvedValueOnce('boom on stderr\n').mockRejectedValueOnce(new Error('logs unavailable'));
		render(AgentPanel, { node: a, records: [], onsend: vi.fn(), loadLogs });
		await fireEvent.click(screen.getByRole('button', { name: /log/i }));
		expect(await screen.findByText(/boom on stderr/)).toBeTruthy();
		expect(loadLogs).toHaveBeenCalledWith('a');
		await fireEvent.click(screen.getByRole('button', { name: 'Reload log' }));
		expect((await screen.findByRole('alert')).textContent).toContain('logs unavailable');
	});

	it('Chat, Files and Log: exactly one looks selected', async () => {
		const loadLogs = vi.fn().mockResolvedValue('stderr line\n');
		render(AgentPanel, { node: a, records: [ev('a', { type: 'text', content: 'hello chat' })], onsend: vi.fn(), loadLogs, sessionId: 's1' });
		const chat = screen.getByRole('tab', { name: 'Chat' });
		const log = screen.getByRole('button', { name: /log/i });
		const selected = () => ({
			chat: chat.getAttribute('aria-selected') === 'true' && chat.classList.contains('on'),
			log: log.getAttribute('aria-pressed') === 'true' && log.classList.contains('on')
		});
		expect(selected()).toEqual({ chat: true, log: false });
		await fireEvent.click(log);
		expect(await screen.findByText(/stderr line/)).toBeTruthy();
		expect(selected()).toEqual({ chat: false, log: true });
		expect(chat.classList.contains('on') || chat.getAttribute('aria-selected') === 'true').toBe(false);
		await fireEvent.click(chat);
		expect(selected()).toEqual({ chat: true, log: false });
		expect(screen.getByText('hello chat')).toBeTruthy();
		expect(screen.queryByText(/stderr line/)).toBeNull();
	});

	it('header: the name never gives way to the buttons (they wrap to a second row instead)', () => {
		const remove = injectStyles('src/lib/components/session/AgentPanel.svelte');
		try {
			render(AgentPanel, { node: node('e', null, 'echo', 'idle'), records: [], onsend: vi.fn(), onstop: vi.fn(), ondelete: vi.fn(), loadLogs: vi.fn(), sessionId: 's1' });
			const name = screen.getByRole('heading', { name: 'echo' });
			const ident = screen.getByTestId('ident');
			const tools = screen.getByTestId('tools');
			expect(name.parentElement).toBe(ident);
			expect(tools.contains(screen.getByRole('button', { name: /Stop/ }))).toBe(true);
			expect(tools.contains(screen.getByRole('tab', { name: 'Chat' }))).toBe(true);
			expect(getComputedStyle(ident.parentElement!).flexWrap).toBe('wrap');
			expect(getComputedStyle(ident).minWidth).toBe('0px');
			expect(getComputedStyle(name).minWidth).toBe('0px');
			expect(getComputedStyle(name).textOverflow).toBe('ellipsis');
			expect(getComputedStyle(tools).flexShrink).toBe('0');
			expect(getComputedStyle(screen.getByTestId('status-label')).whiteSpace).toBe('nowrap');
		} finally {
			remove();
		}
	});

	it('without a node it offers to spawn', async () => {
		const onspawn = vi.fn();
		render(AgentPanel, { node: undefined, records: [], onsend: vi.fn(), onspawn });
		await fireEvent.click(screen.getByRole('button', { name: /spawn an agent/i }));
		expect(onspawn).toHaveBeenCalled();
	});

	const tokens = [
		{ in: 0, want: '0' },
		{ in: 999, want: '999' },
		{ in: 1500, want: '1.5k' },
		{ in: 48213, want: '48k' },
		{ in: 2_500_000, want: '2.5M' }
	];
	for (const t of tokens) it(`formatTokens(${t.in})`, () => expect(formatTokens(t.in)).toBe(t.want));

	it('stops a running agent and shows a refused stop', async () => {
		const onstop = vi.fn().mockRejectedValueOnce(new Error('node a is not running')).mockResolvedValue(undefined);
		render(AgentPanel, { node: a, records: [], onsend: vi.fn(), onstop });
		await fireEvent.click(screen.getByRole('button', { name: /Stop/ }));
		expect(onstop).toHaveBeenCalledWith('a');
		expect((await screen.findByRole('alert')).textContent).toContain('Could not stop the agent: node a is not running');
		await fireEvent.click(screen.getByRole('button', { name: /Stop/ }));
		expect(onstop).toHaveBeenCalledTimes(2);
		expect(screen.queryByRole('alert')).toBeNull();
	});

	const stopCases = [
		{ name: 'idle (waiting for input, container alive)', status: 'idle', stop: true },
		{ name: 'thinking', status: 'thinking', stop: true },
		{ name: 'running', status: 'running', stop: true },
		{ name: 'done, no container', status: 'done', stop: false },
		{ name: 'error, no container', status: 'error', stop: false },
		{ name: 'done, container exited', status: 'done', extra: { container_id: 'c', exit_code: 0 }, stop: false },
		{ name: 'error, container exited', status: 'error', extra: { container_id: 'c', exit_code: 1 }, stop: false },
		// Shelley stays up after `done`; a budget refusal leaves the agent `error` with its container up.
		{ name: 'done, container still running', status: 'done', extra: { container_id: 'c' }, stop: true },
		{ name: 'error, container still running', status: 'error', extra: { container_id: 'c' }, stop: true },
		{ name: 'stopped, container exited', status: 'stopped', extra: { container_id: 'c', exit_code: 0 }, stop: false },
		{ name: 'lost, no container', status: 'lost', stop: false },
		{ name: 'paused (its container frozen)', status: 'paused', extra: { container_id: 'c' }, stop: true }
	] as const;
	for (const c of stopCases)
		it(`offers Stop for ${c.name}: ${c.stop}`, () => {
			const extra = 'extra' in c ? c.extra : {};
			render(AgentPanel, { node: node('n', null, 'n', c.status, extra), records: [], onsend: vi.fn(), onstop: vi.fn() });
			expect(screen.queryByRole('button', { name: /Stop/ }) !== null).toBe(c.stop);
		});

	it("deletes only after the app's own dialog confirms (never the browser's confirm)", async () => {
		const ondelete = vi.fn().mockResolvedValue(undefined);
		const native = vi.spyOn(window, 'confirm');
		render(AgentPanel, { node: b, records: [], onsend: vi.fn(), ondelete });
		await fireEvent.click(screen.getByRole('button', { name: /Delete/ }));
		let dlg = screen.getByRole('dialog', { name: 'Delete beta' });
		expect(dlg.textContent).toContain('Delete beta and every agent under it?');
		expect(ondelete).not.toHaveBeenCalled();
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(screen.queryByRole('dialog')).toBeNull();
		expect(ondelete).not.toHaveBeenCalled();
		await fireEvent.click(screen.getByRole('button', { name: /Delete/ }));
		dlg = screen.getByRole('dialog', { name: 'Delete beta' });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Delete' }));
		expect(ondelete).toHaveBeenCalledWith('b');
		await vi.waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(native).not.toHaveBeenCalled();
		native.mockRestore();
	});

	it('a refused delete shows its reason in the dialog', async () => {
		const ondelete = vi.fn().mockRejectedValue(new Error('node b is being deleted'));
		render(AgentPanel, { node: b, records: [], onsend: vi.fn(), ondelete });
		await fireEvent.click(screen.getByRole('button', { name: /Delete/ }));
		await fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
		expect((await screen.findByRole('alert')).textContent).toContain('node b is being deleted');
	});

	it('pauses and resumes; a paused agent shows Paused in the header, not its old status', async () => {
		const onpause = vi.fn().mockResolvedValue(undefined);
		const onresume = vi.fn().mockRejectedValueOnce(new Error('node a is not running')).mockResolvedValue(undefined);
		const running = { ...a, container_id: 'c1' };
		const { rerender } = render(AgentPanel, { node: running, records: [], onsend: vi.fn(), onpause, onresume });
		expect(screen.queryByRole('button', { name: 'Resume' })).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: /Pause/ }));
		expect(onpause).toHaveBeenCalledWith('a');

		await rerender({ node: { ...running, status: 'paused' } });
		const label = screen.getByTestId('status-label');
		expect(label.textContent).toBe('Paused');
		expect(label.style.color).toBe('var(--status-paused)');
		expect(screen.queryByRole('button', { name: /Pause/ })).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: 'Resume' }));
		expect((await screen.findByRole('alert')).textContent).toContain('Could not resume the agent: node a is not running');
		await fireEvent.click(screen.getByRole('button', { name: 'Resume' }));
		expect(onresume).toHaveBeenCalledTimes(2);

		await rerender({ node: running });
		expect(screen.getByTestId('status-label').textContent).toBe('Running');
	});

	it('issue 27.1: an agent paused after it said done shows Paused and Resume, and says a message waits for the resume', async () => {
		// Shelley keeps its container after done; the server shows it paused whatever it said last.
		const onsend = vi.fn().mockResolvedValue({});
		const onresume = vi.fn().mockResolvedValue(undefined);
		render(AgentPanel, { node: node('s', null, 'shelley1', 'paused', { container_id: 'c1' }), records: [], onsend, onpause: vi.fn(), onresume, onstop: vi.fn() });
		expect(screen.getByTestId('status-label').textContent).toBe('Paused');
		expect(screen.queryByRole('button', { name: 'Pause' })).toBeNull();
		expect(screen.getByRole('button', { name: 'Resume' })).toBeTruthy();
		expect(screen.getByRole('button', { name: 'Stop' })).toBeTruthy();
		expect(screen.getByTestId('paused-note').textContent).toMatch(/waits, and reaches shelley1 when you resume it/);
		const area = screen.getByLabelText('Message');
		await fireEvent.input(area, { target: { value: 'are you there?' } });
		await fireEvent.keyDown(area, { key: 'Enter' });
		expect(onsend).toHaveBeenCalledWith('s', 'are you there?', []);
		await fireEvent.click(within(screen.getByTestId('paused-note')).getByRole('button', { name: 'Resume it now' }));
		expect(onresume).toHaveBeenCalledWith('s');
	});

	const looks = [
		{ status: 'done', label: 'Done', color: 'var(--status-done)' },
		{ status: 'error', label: 'Error', color: 'var(--status-error)' },
		{ status: 'stopped', label: 'Stopped', color: 'var(--status-stopped)' },
		{ status: 'lost', label: 'Lost', color: 'var(--status-lost)' }
	] as const;
	it('issue 27.3: done, error, stopped and lost each have their own label and colour in the header', () => {
		const seen = new Set<string>();
		for (const l of looks) {
			const { unmount } = render(AgentPanel, { node: node('n', null, 'n', l.status), records: [], onsend: vi.fn() });
			const label = screen.getByTestId('status-label');
			expect(label.textContent).toBe(l.label);
			expect(label.style.color).toBe(l.color);
			seen.add(label.style.color);
			unmount();
		}
		expect(seen.size).toBe(looks.length);
	});

	it('issue 27.8: an agent waiting for an approval says so in its header', () => {
		render(AgentPanel, { node: a, records: [], onsend: vi.fn(), waiting: 1 });
		expect(screen.getByTestId('header-needs-you').textContent).toContain('waits for your answer');
	});

	it('issue 27.2: the Files tab of a forked agent reads its fork (the node-scoped route), of a shared one the session', async () => {
		const urls: string[] = [];
		const fetchMock = vi.fn(async (u: string) => {
			urls.push(String(u));
			return new Response(JSON.stringify({ data: [] }), { status: 200, headers: { 'Content-Type': 'application/json' } });
		});
		vi.stubGlobal('fetch', fetchMock);
		try {
			const forked = node('f', 'a', 'forky', 'idle', { workspace: 'fork' });
			const { unmount } = render(AgentPanel, { node: forked, records: [], onsend: vi.fn(), sessionId: 's1' });
			await fireEvent.click(screen.getByRole('tab', { name: 'Files' }));
			await vi.waitFor(() => expect(urls).toContain('/api/v1/sessions/s1/nodes/f/fs'));
			unmount();
			urls.length = 0;
			render(AgentPanel, { node: b, records: [], onsend: vi.fn(), sessionId: 's1' });
			await fireEvent.click(screen.getByRole('tab', { name: 'Files' }));
			await vi.waitFor(() => expect(urls).toContain('/api/v1/sessions/s1/fs'));
			expect(urls.some((u) => u.includes('/nodes/'))).toBe(false);
		} finally {
			vi.unstubAllGlobals();
		}
	});

	const pauseCases = [
		{ name: 'running with a container', n: node('n', null, 'n', 'running', { container_id: 'c' }), pause: true },
		{ name: 'idle with a container', n: node('n', null, 'n', 'idle', { container_id: 'c' }), pause: true },
		{ name: 'no container', n: node('n', null, 'n', 'idle'), pause: false },
		{ name: 'done, container exited', n: node('n', null, 'n', 'done', { container_id: 'c', exit_code: 0 }), pause: false },
		{ name: 'running, container exited', n: node('n', null, 'n', 'running', { container_id: 'c', exit_code: 0 }), pause: false },
		{ name: 'done, container still running', n: node('n', null, 'n', 'done', { container_id: 'c' }), pause: true },
		{ name: 'error, container still running', n: node('n', null, 'n', 'error', { container_id: 'c' }), pause: true },
		{ name: 'paused already', n: node('n', null, 'n', 'paused', { container_id: 'c' }), pause: false }
	];
	for (const c of pauseCases)
		it(`offers Pause for ${c.name}: ${c.pause}`, () => {
			render(AgentPanel, { node: c.n, records: [], onsend: vi.fn(), onpause: vi.fn(), onresume: vi.fn() });
			expect(screen.queryByRole('button', { name: /Pause/ }) !== null).toBe(c.pause);
		});

	it('offers Move for every agent but the root', async () => {
		const onmove = vi.fn();
		const { rerender } = render(AgentPanel, { node: a, records: [], onsend: vi.fn(), onmove });
		expect(screen.queryByRole('button', { name: /Move/ })).toBeNull();
		await rerender({ node: b });
		await fireEvent.click(screen.getByRole('button', { name: /Move/ }));
		expect(onmove).toHaveBeenCalledWith('b');
	});
});
