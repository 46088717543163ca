import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import DiffView from './DiffView.svelte';
import AgentPanel from './AgentPanel.svelte';
import { ApiError } from '$lib/api';
import type { AgentNode, ForkDiff, MergeResult } from '$lib/types';

const fork = { id: 'ws-1', base: 'ws-0', origin: 's1', session_id: 's1', created_at: '2026-01-01T00:00:00Z' };
const diff: ForkDiff = {
	fork,
	changes: [
		{ path: '/a.txt', op: 'changed', kind: 'file', old_size: 14, new_size: 14, diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n' },
		{ path: '/img.png', op: 'added', kind: 'file', old_size: 0, new_size: 9000, binary: true },
		{ path: '/new', op: 'added', kind: 'dir', old_size: 0, new_size: 0 },
		{ path: '/old.txt', op: 'deleted', kind: 'file', old_size: 3, new_size: 0, diff: '--- a/old.txt\n+++ b/old.txt\n@@ -1,1 +0,0 @@\n-old\n' }
	]
};

describe('DiffView', () => {
	it('lists the changed files and opens a text diff', async () => {
		render(DiffView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(diff) });
		const list = await screen.findByRole('list', { name: 'Changed files' });
		expect(list.textContent).toContain('/a.txt');
		expect(list.textContent).toContain('/old.txt');
		expect(screen.getByText(/3 files, 1 dir/)).toBeTruthy();
		expect(screen.queryByTestId('patch')).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: /\/a\.txt/ }));
		const patch = screen.getByTestId('patch');
		expect(patch.textContent).toContain('-two\n+TWO');
		expect(patch.querySelector('.add')?.textContent).toBe('+TWO\n');
		expect(patch.querySelector('.del')?.textContent).toBe('-two\n');
		await fireEvent.click(screen.getByRole('button', { name: /\/img\.png/ }));
		expect(screen.getByText('Binary or large file: no text diff.')).toBeTruthy();
	});

	it('says which other names a hard-linked file has', async () => {
		const linked: ForkDiff = {
			fork,
			changes: [
				{ path: '/b', op: 'added', kind: 'file', old_size: 0, new_size: 2, links: ['/a', '/d/c'], diff: '--- a/b\n+++ b/b\n@@ -0,0 +1,1 @@\n+x\n' },
				{ path: '/twin', op: 'changed', kind: 'file', old_size: 2, new_size: 2, links: ['/a'] }
			]
		};
		render(DiffView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(linked) });
		await screen.findByRole('list', { name: 'Changed files' });
		await fireEvent.click(screen.getByRole('button', { name: /\/b/ }));
		expect(screen.getByTestId('links').textContent).toBe('Hard link: the same file as /a, /d/c.');
		expect(screen.getByTestId('patch').textContent).toContain('+x');
		await fireEvent.click(screen.getByRole('button', { name: /\/twin/ }));
		expect(screen.getByTestId('links').textContent).toBe('Hard link: the same file as /a.');
		expect(screen.getByText('No text difference: the path now names another file with the same bytes.')).toBeTruthy();
	});

	it("lists the work first and folds git's own files behind one row", async () => {
		const withGit: ForkDiff = {
			fork,
			changes: [
				{ path: '/.git/index', op: 'changed', kind: 'file', old_size: 100, new_size: 120, binary: true },
				{ path: '/.git/objects/32/e1', op: 'added', kind: 'file', old_size: 0, new_size: 50, binary: true },
				{ path: '/.git/objects/32', op: 'added', kind: 'dir', old_size: 0, new_size: 0 },
				{ path: '/notes/fork.md', op: 'added', kind: 'file', old_size: 0, new_size: 7, diff: '--- a/notes/fork.md\n+++ b/notes/fork.md\n@@ -0,0 +1,1 @@\n+forked\n' }
			]
		};
		render(DiffView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(withGit) });
		const list = await screen.findByRole('list', { name: 'Changed files' });
		expect(screen.getByText(/3 files, 1 dir/)).toBeTruthy();
		const rows = [...list.querySelectorAll(':scope > li > button .path')].map((e) => e.textContent);
		expect(rows).toEqual(['/notes/fork.md', '/.git/']);
		expect(list.textContent).toContain("git's own files: 2 changes");
		expect(screen.queryByRole('button', { name: /\/\.git\/index/ })).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: /git's own files/ }));
		expect(screen.getByRole('button', { name: /\/\.git\/index/ })).toBeTruthy();
		expect(screen.getByRole('button', { name: /\/\.git\/objects\/32\/e1/ })).toBeTruthy();
	});

	it('merges, then shows what was applied and the conflicts, and reloads the diff', async () => {
		const load = vi.fn().mockResolvedValueOnce(diff).mockResolvedValue({ fork, changes: [diff.changes[1]] });
		const result: MergeResult = {
			fork,
			applied: [diff.changes[0], diff.changes[3]],
			conflicts: [{ path: '/both.txt', fork: 'changed', parent: 'deleted' }]
		};
		const onmerge = vi.fn().mockResolvedValue(result);
		render(DiffView, { nodeId: 'n1', load, onmerge });
		await screen.findByRole('list', { name: 'Changed files' });
		await fireEvent.click(screen.getByRole('button', { name: /Merge/ }));
		await confirmMerge();
		expect(onmerge).toHaveBeenCalledWith('n1');
		const status = await screen.findByTestId('merge-result');
		expect(status.textContent).toContain('Merged 2 changes');
		const conflicts = screen.getByRole('list', { name: 'Conflicts' });
		expect(conflicts.textContent).toContain('/both.txt');
		expect(conflicts.textContent).toContain('changed here, deleted in the parent');
		await waitFor(() => expect(load).toHaveBeenCalledTimes(2));
		await waitFor(() => expect(screen.queryByRole('button', { name: /\/a\.txt/ })).toBeNull());
	});

	it('says a failed merge applied nothing', async () => {
		const onmerge = vi.fn().mockRejectedValue(new ApiError(413, 'quota_exceeded', 'session quota exceeded'));
		render(DiffView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(diff), onmerge });
		await screen.findByRole('list', { name: 'Changed files' });
		await fireEvent.click(screen.getByRole('button', { name: /Merge/ }));
		await confirmMerge();
		expect((await screen.findByRole('alert')).textContent).toContain('Merge failed, nothing was applied: session quota exceeded');
	});

	it('issue 27.8: Merge asks first; Cancel merges nothing', async () => {
		const onmerge = vi.fn();
		render(DiffView, { nodeId: 'n1', load: vi.fn().mockResolvedValue(diff), onmerge });
		await screen.findByRole('list', { name: 'Changed files' });
		await fireEvent.click(screen.getByRole('button', { name: /Merge/ }));
		const dlg = screen.getByRole('dialog', { name: 'Merge into the parent' });
		expect(dlg.textContent).toMatch(/Apply this fork's \d+ changed files? to its parent's workspace\?/);
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(screen.queryByRole('dialog')).toBeNull();
		expect(onmerge).not.toHaveBeenCalled();
	});
});

async function confirmMerge() {
	const dlg = screen.getByRole('dialog', { name: 'Merge into the parent' });
	await fireEvent.click(within(dlg).getByRole('button', { name: 'Merge' }));
}

const node = (id: string, parent: string | null): AgentNode =>
	({ id, session_id: 's1', parent_id: parent, name: id, agent_type: 'shelley', model: '', status: 'idle', tokens: 0 }) as unknown as AgentNode;

describe('AgentPanel Changes tab', () => {
	it('shows for a forked child only', async () => {
		const loadDiff = vi.fn((id: string) => (id === 'kid' ? Promise.resolve(diff) : Promise.reject(new ApiError(404, 'not_found', 'shared'))));
		const props = { node: { ...node('kid', 'root'), workspace: 'fork' } as AgentNode, records: [], onsend: vi.fn(), sessionId: 's1', loadDiff, onmerge: vi.fn() };
		const { rerender } = render(AgentPanel, props);
		const tab = await screen.findByRole('tab', { name: 'Changes' });
		await fireEvent.click(tab);
		expect(await screen.findByTestId('diff')).toBeTruthy();
		await rerender({ ...props, node: { ...node('other', 'root'), workspace: 'shared' } as AgentNode });
		await waitFor(() => expect(screen.queryByRole('tab', { name: 'Changes' })).toBeNull());
		expect(screen.queryByTestId('diff')).toBeNull();
		await rerender({ ...props, node: node('root', null) });
		expect(loadDiff).not.toHaveBeenCalledWith('root');
	});
});
