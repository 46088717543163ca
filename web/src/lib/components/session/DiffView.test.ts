import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import DiffView from './DiffView.svelte';
import ChangesView from './ChangesView.svelte';
import AgentPanel from './AgentPanel.svelte';
import { commentRange, parsePatch } from '../changes/patch';
import { createFileFeed } from '$lib/files';
import type { AgentNode, LogRecord } from '$lib/types';
import type { Changes, FileDiff } from '$lib/openapi/generated';

const goFile: FileDiff = {
	path: 'src/main.go',
	status: 'modified',
	old_size: 40,
	new_size: 60,
	additions: 2,
	deletions: 1,
	patch: '@@ -1,4 +1,5 @@ package main\n func main() {\n-\tprintln("hi")\n+\tprintln("hello")\n+\tprintln("world")\n }\n // end\n\\ No newline at end of file\n'
};

describe('parsePatch', () => {
	it('numbers the lines of both sides and marks a missing final newline', () => {
		const rows = parsePatch(goFile.patch!);
		expect(rows.map((r) => r.kind)).toEqual(['hunk', 'ctx', 'del', 'add', 'add', 'ctx', 'ctx']);
		expect(rows[1]).toMatchObject({ old: 1, new: 1, text: 'func main() {' });
		expect(rows[2]).toMatchObject({ old: 2, text: '\tprintln("hi")' });
		expect(rows[3]).toMatchObject({ new: 2 });
		expect(rows[4]).toMatchObject({ new: 3 });
		expect(rows[6]).toMatchObject({ old: 4, new: 5, noNewline: true });
	});
	it('comments on new lines by their new numbers, on deleted lines only by their old ones', () => {
		const rows = parsePatch(goFile.patch!);
		expect(commentRange(rows, { from: 2, to: 4 })).toEqual({ side: 'new', start: 2, end: 3, lines: ['-\tprintln("hi")', '+\tprintln("hello")', '+\tprintln("world")'] });
		expect(commentRange(rows, { from: 2, to: 2 })).toEqual({ side: 'old', start: 2, end: 2, lines: ['-\tprintln("hi")'] });
	});
});

describe('DiffView', () => {
	it('shows a file collapsible, its lines numbered on both sides and highlighted', async () => {
		const { container } = render(DiffView, { file: goFile });
		const table = screen.getByTestId('patch');
		expect(within(table).getAllByTestId('row')).toHaveLength(6);
		expect(table.textContent).toContain('println("hello")');
		// go is highlighted: the string is a token of its own
		expect([...container.querySelectorAll('.hljs-string')].map((e) => e.textContent)).toEqual(['"hi"', '"hello"', '"world"']);
		expect(screen.getByText('+2')).toBeTruthy();
		await fireEvent.click(container.querySelector('button.head')!);
		expect(screen.queryByTestId('patch')).toBeNull();
	});

	it('summarises a binary file and shows a large one on request', async () => {
		render(DiffView, { file: { path: 'logo.png', status: 'added', old_size: 0, new_size: 20480, binary: true, type: 'image/png', additions: 0, deletions: 0 } });
		expect(screen.getByTestId('binary').textContent).toContain('image/png');
		expect(screen.getByTestId('binary').textContent).toContain('20.0 KiB');
	});

	it('loads a large file in full with Show anyway', async () => {
		const loadFull = vi.fn().mockResolvedValue(goFile);
		render(DiffView, { file: { ...goFile, patch: undefined, too_large: true }, loadFull });
		expect(screen.getByTestId('large').textContent).toContain('Large diff');
		await fireEvent.click(screen.getByText('Show anyway'));
		expect(await screen.findByTestId('patch')).toBeTruthy();
		expect(loadFull).toHaveBeenCalledOnce();
	});

	it('sends a comment on the lines selected with a click and a shift-click', async () => {
		const oncomment = vi.fn().mockResolvedValue({});
		render(DiffView, { file: goFile, oncomment });
		await fireEvent.click(screen.getAllByLabelText('Select line 2')[0]);
		await fireEvent.click(screen.getAllByLabelText('Select line 3')[1], { shiftKey: true });
		expect(screen.getByText('Comment on lines 2-3')).toBeTruthy();
		await fireEvent.input(screen.getByTestId('comment-body'), { target: { value: 'Print once.' } });
		await fireEvent.click(screen.getByText('Send to agent'));
		expect(oncomment).toHaveBeenCalledWith({ path: 'src/main.go', start_line: 2, end_line: 3, side: 'new', lines: ['-\tprintln("hi")', '+\tprintln("hello")', '+\tprintln("world")'], body: 'Print once.' });
		expect(await screen.findByText('Sent your comment on lines 2-3 to the agent.')).toBeTruthy();
	});
});

const changes = (over: Partial<Changes> = {}): Changes => ({
	repository: true,
	base: { kind: 'clone', commit: 'aaaaaaaa11' },
	head: 'bbbbbbbb22',
	branch: 'main',
	commits: [{ id: 'bbbbbbbb22', subject: 'say hello', message: 'say hello', author: 'Ada', author_email: 'a@x', when: '2026-01-01T00:00:00Z', parents: ['aaaaaaaa11'], record: 9, ref: 7 }],
	committed: [{ ...goFile, path: 'src/old.go' }],
	uncommitted: [goFile],
	...over
});

describe('ChangesView', () => {
	it('shows uncommitted changes apart from the commits, each commit linking to its record', async () => {
		const onjump = vi.fn();
		render(ChangesView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(changes()), loadFile: vi.fn(), onjump });
		const unc = await screen.findByRole('region', { name: 'Uncommitted changes' });
		expect(within(unc).getAllByTestId('diff-file').map((f) => f.dataset.path)).toEqual(['src/main.go']);
		const com = screen.getByRole('region', { name: 'Commits' });
		expect(within(com).getAllByTestId('diff-file').map((f) => f.dataset.path)).toEqual(['src/old.go']);
		expect(screen.getByTestId('head').textContent).toContain('On main at bbbbbbbb · against the clone commit aaaaaaaa');
		await fireEvent.click(within(com).getByRole('button', { name: 'made by…' }));
		expect(onjump).toHaveBeenCalledWith(7);
	});

	it('follows the agent: a file record reloads the changes', async () => {
		const feed = createFileFeed();
		const load = vi.fn().mockResolvedValueOnce(changes({ uncommitted: [] })).mockResolvedValue(changes());
		render(ChangesView, { nodeId: 'n1', load, loadFile: vi.fn(), feed });
		expect(await screen.findByText('The working tree is as HEAD has it.')).toBeTruthy();
		feed.push({ seq: 5, kind: 'file', node_id: '', at: '', data: { op: 'modified', path: '/src/main.go', size: 60 } } as LogRecord);
		await waitFor(() => expect(load).toHaveBeenCalledTimes(2));
		const unc = await screen.findByRole('region', { name: 'Uncommitted changes' });
		await waitFor(() => expect(within(unc).getAllByTestId('diff-file')).toHaveLength(1));
	});

	it('a live reload keeps a comment being written, and the note that one was sent', async () => {
		const feed = createFileFeed();
		const load = vi.fn().mockImplementation(async () => changes());
		const oncomment = vi.fn().mockResolvedValue({});
		render(ChangesView, { nodeId: 'n1', load, loadFile: vi.fn(), feed, oncomment });
		const unc = await screen.findByRole('region', { name: 'Uncommitted changes' });
		await fireEvent.click((await within(unc).findAllByLabelText('Select line 2'))[0]);
		await fireEvent.click(within(unc).getAllByLabelText('Select line 3')[1], { shiftKey: true });
		await fireEvent.input(within(unc).getByTestId('comment-body'), { target: { value: 'Print once.' } });
		const reload = async (seq: number) => {
			const n = load.mock.calls.length;
			feed.push({ seq, kind: 'file', node_id: 'n1', at: '', data: { op: 'modified', path: '/src/main.go', size: 60 } } as LogRecord);
			await waitFor(() => expect(load.mock.calls.length).toBe(n + 1));
		};
		await reload(5);
		expect((within(unc).getByTestId('comment-body') as HTMLTextAreaElement).value).toBe('Print once.');
		await fireEvent.click(within(unc).getByText('Send to agent'));
		expect(await within(unc).findByText('Sent your comment on lines 2-3 to the agent.')).toBeTruthy();
		await reload(6);
		expect(within(unc).getByText('Sent your comment on lines 2-3 to the agent.')).toBeTruthy();
	});

	it('reloads against the base the user picks, and merges a fork', async () => {
		const load = vi.fn().mockResolvedValue(changes({ base: { kind: 'fork', commit: 'cccccccc' } }));
		const onmerge = vi.fn().mockResolvedValue({ applied: ['/a'], conflicts: [] });
		render(ChangesView, { nodeId: 'n1', load, loadFile: vi.fn(), onmerge });
		await screen.findByTestId('head');
		await fireEvent.input(screen.getByRole('textbox', { name: 'Base ref' }), { target: { value: 'v1.0' } });
		await fireEvent.submit(screen.getByRole('textbox', { name: 'Base ref' }).closest('form')!);
		await waitFor(() => expect(load).toHaveBeenLastCalledWith('n1', 'v1.0'));
		await fireEvent.click(await screen.findByRole('button', { name: 'Merge' }));
		const dlg = screen.getByRole('dialog', { name: 'Merge into the parent' });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Merge' }));
		expect((await screen.findByTestId('merge-result')).textContent).toContain('Merged 1 change');
	});

	it('issue 27.8: after a merge, Merge waits for the agent to change more (no "Merged 0 changes")', async () => {
		const load = vi.fn().mockResolvedValue(changes({ base: { kind: 'fork', commit: 'cccccccc' } }));
		const onmerge = vi.fn().mockResolvedValue({ applied: ['/a'], conflicts: [] });
		const feed = createFileFeed();
		render(ChangesView, { nodeId: 'n1', load, loadFile: vi.fn(), onmerge, feed });
		await screen.findByTestId('head');
		await fireEvent.click(await screen.findByRole('button', { name: 'Merge' }));
		await fireEvent.click(within(screen.getByRole('dialog', { name: 'Merge into the parent' })).getByRole('button', { name: 'Merge' }));
		const done = await screen.findByRole('button', { name: 'Merged' });
		expect((done as HTMLButtonElement).disabled).toBe(true);
		// the merge's own writes land in the parent: they change nothing here
		feed.push({ seq: 9, kind: 'file', node_id: 'parent', at: '', data: { path: '/a', op: 'write' } } as unknown as LogRecord);
		expect((screen.getByRole('button', { name: 'Merged' }) as HTMLButtonElement).disabled).toBe(true);
		// the agent writes again: there is something to merge
		feed.push({ seq: 10, kind: 'file', node_id: 'n1', at: '', data: { path: '/b', op: 'write' } } as unknown as LogRecord);
		await waitFor(() => expect((screen.getByRole('button', { name: 'Merge' }) as HTMLButtonElement).disabled).toBe(false));
		expect(onmerge).toHaveBeenCalledTimes(1);
	});

	it('issue 27.8: Merge asks first; Cancel merges nothing', async () => {
		const load = vi.fn().mockResolvedValue(changes({ base: { kind: 'fork', commit: 'cccccccc' } }));
		const onmerge = vi.fn();
		render(ChangesView, { nodeId: 'n1', load, loadFile: vi.fn(), onmerge });
		await screen.findByTestId('head');
		await fireEvent.click(await screen.findByRole('button', { name: 'Merge' }));
		const dlg = screen.getByRole('dialog', { name: 'Merge into the parent' });
		expect(dlg.textContent).toContain("Apply this fork's changes to its parent's workspace?");
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(screen.queryByRole('dialog')).toBeNull();
		expect(onmerge).not.toHaveBeenCalled();
	});
});

const node = (id: string, parent: string | null): AgentNode =>
	({ id, session_id: 's1', parent_id: parent, name: id, agent_type: 'shelley', model: '', status: 'idle', tokens: 0 }) as unknown as AgentNode;

describe('AgentPanel Changes tab', () => {
	it('shows for every agent, and a comment in the chat opens its diff at its lines', async () => {
		const loadChanges = vi.fn().mockResolvedValue(changes());
		const comment: LogRecord = {
			seq: 3,
			kind: 'input',
			node_id: 'root',
			at: '2026-01-01T00:00:00Z',
			data: { type: 'message', from: 'user', content: 'Comment on src/main.go, lines 3-4:\n\n> +a\n\nPrint once.', comment: { path: 'src/main.go', start_line: 3, end_line: 4, side: 'new', section: 'uncommitted' } }
		} as LogRecord;
		render(AgentPanel, { node: node('root', null), records: [comment], onsend: vi.fn(), sessionId: 's1', loadChanges, loadChangeFile: vi.fn() });
		expect(screen.getByRole('tab', { name: 'Changes' })).toBeTruthy();
		await fireEvent.click(screen.getByTestId('comment-link'));
		expect(await screen.findByTestId('changes')).toBeTruthy();
		await screen.findAllByTestId('diff-file');
		const marked = document.querySelectorAll('tr.mark');
		expect(marked).toHaveLength(2);
		expect(loadChanges).toHaveBeenCalledWith('root', '');
	});
	it("an update of the node (its status) keeps the tab as it is: no reload, the marked lines, a comment being written", async () => {
		const loadChanges = vi.fn().mockResolvedValue(changes());
		const comment: LogRecord = {
			seq: 3,
			kind: 'input',
			node_id: 'root',
			at: '2026-01-01T00:00:00Z',
			data: { type: 'message', from: 'user', content: 'Comment on src/main.go, lines 2-3', comment: { path: 'src/main.go', start_line: 2, end_line: 3, side: 'new', section: 'uncommitted' } }
		} as LogRecord;
		const n = node('root', null);
		const { rerender } = render(AgentPanel, { node: n, records: [comment], onsend: vi.fn(), sessionId: 's1', loadChanges, loadChangeFile: vi.fn(), oncomment: vi.fn() });
		await fireEvent.click(screen.getByTestId('comment-link'));
		await screen.findAllByTestId('diff-file');
		await waitFor(() => expect(document.querySelectorAll('tr.mark')).toHaveLength(2));
		const unc = screen.getByRole('region', { name: 'Uncommitted changes' });
		await fireEvent.click(within(unc).getAllByLabelText('Select line 2')[0]);
		await fireEvent.click(within(unc).getAllByLabelText('Select line 3')[1], { shiftKey: true });
		await fireEvent.input(within(unc).getByTestId('comment-body'), { target: { value: 'Print once.' } });
		await rerender({ node: { ...n, status: 'thinking' } });
		await rerender({ node: { ...n, status: 'done', tokens: 10 } });
		expect(loadChanges).toHaveBeenCalledTimes(1);
		expect(document.querySelectorAll('tr.mark')).toHaveLength(2);
		expect((screen.getByTestId('comment-body') as HTMLTextAreaElement).value).toBe('Print once.');
	});
});
