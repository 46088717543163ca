import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import ApprovalsInbox from './ApprovalsInbox.svelte';
import ApprovalBlock from '../chat/ApprovalBlock.svelte';
import AuditView from './AuditView.svelte';
import { toItems } from './chatItems';
import { ApprovalInbox } from '$lib/live/approvals.svelte';
import { ApiError } from '$lib/api';
import type { Approval, LogRecord } from '$lib/types';

const base: Approval = { id: 'a1', action: 'bash: curl https://x', detail: 'it names a URL', kind: 'bash', status: 'pending', expires_at: '2026-01-01T00:10:00Z' };
const rec = (seq: number, node: string, a: Partial<Approval>): LogRecord =>
	({ seq, kind: 'system', node_id: node, at: '2026-01-01T00:00:00Z', data: { type: 'approval', text: 't', approval: { ...base, ...a } } }) as LogRecord;

describe('approvals in the chat', () => {
	it('a request and its answer are one block, answered in place', () => {
		const items = toItems([
			rec(3, 'n', {}),
			{ seq: 4, kind: 'event', node_id: 'n', at: '', data: { type: 'text', content: 'waiting' } } as LogRecord,
			rec(5, 'n', { status: 'approved', answered_by: 'alice', answered_at: '2026-01-01T00:01:00Z' })
		]);
		expect(items.map((i) => i.kind)).toEqual(['approval', 'text']);
		const it0 = items[0];
		expect(it0.kind === 'approval' && it0.key === 3 && it0.a.status === 'approved' && it0.a.answered_by === 'alice').toBe(true);
	});

	it('issue 27.8: "approved by NAME · TIME" keeps its spaces', () => {
		render(ApprovalBlock, { a: { ...base, status: 'approved', answered_by: 'admin', answered_at: '2026-01-01T14:18:00Z', always: true } });
		expect(screen.getByTestId('approval-answer').textContent).toMatch(/^approved by admin · \S.* · bash always allowed from now on$/);
	});

	it('a pending block answers through onanswer; an answered one names who', async () => {
		const onanswer = vi.fn().mockRejectedValueOnce(new ApiError(409, 'conflict', 'approval a1 was already denied by bob')).mockResolvedValue({});
		const { unmount } = render(ApprovalBlock, { a: base, onanswer });
		await fireEvent.click(screen.getByRole('button', { name: 'Approve' }));
		expect((await screen.findByRole('alert')).textContent).toContain('already denied by bob');
		await fireEvent.click(screen.getByRole('button', { name: 'Always allow' }));
		expect(onanswer).toHaveBeenLastCalledWith('a1', 'always');
		unmount();
		const timedOut = render(ApprovalBlock, { a: { ...base, status: 'denied', answered_by: 'timeout' } });
		expect(screen.getByTestId('approval-answer').textContent).toContain('denied by nobody answered in time');
		expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
		timedOut.unmount();
		render(ApprovalBlock, { a: { ...base, status: 'denied', answered_by: 'agent' } });
		expect(screen.getByTestId('approval-answer').textContent).toContain('withdrawn by the agent');
		expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
	});
});

describe('ApprovalInbox', () => {
	it('counts pending requests of the whole tree from the records, and forgets deleted nodes', () => {
		const box = new ApprovalInbox();
		box.push(rec(1, 'n1', { id: 'a1' }));
		box.push(rec(2, 'n2', { id: 'a2' }));
		box.push({ seq: 3, kind: 'event', node_id: 'n1', at: '', data: { type: 'text', content: 'x' } } as LogRecord);
		expect(box.pending.map((e) => e.id)).toEqual(['a1', 'a2']);
		box.push(rec(4, 'n1', { id: 'a1', status: 'denied', answered_by: 'alice' }));
		expect(box.pending.map((e) => e.id)).toEqual(['a2']);
		expect(box.answered().map((e) => [e.id, e.seq, e.status])).toEqual([['a1', 1, 'denied']]);
		box.forget(['n2']);
		expect(box.pending).toEqual([]);
	});
});

describe('ApprovalsInbox', () => {
	it('the badge counts what waits; the list names the agent, action and detail, and answers', async () => {
		const box = new ApprovalInbox();
		box.push(rec(1, 'n1', { id: 'a1' }));
		box.push(rec(2, 'n2', { id: 'a2', action: 'bash: git push', detail: 'git push talks to a remote', kind: 'bash' }));
		const onanswer = vi.fn().mockResolvedValue({});
		const onselect = vi.fn();
		const names: Record<string, string> = { n1: 'lead', n2: 'worker' };
		render(ApprovalsInbox, { pending: box.pending, nameOf: (id: string) => names[id], onanswer, onselect });
		expect(screen.getByTestId('approvals-count').textContent).toBe('2');
		await fireEvent.click(screen.getByTestId('approvals-badge'));
		const entries = screen.getAllByTestId('approval-entry');
		expect(entries[1].textContent).toContain('worker');
		expect(entries[1].textContent).toContain('bash: git push');
		expect(entries[1].textContent).toContain('git push talks to a remote');
		await fireEvent.click(entries[1].querySelectorAll('button')[2]); // Deny
		expect(onanswer).toHaveBeenCalledWith('a2', 'deny');
		await fireEvent.click(screen.getByRole('button', { name: 'worker' }));
		expect(onselect).toHaveBeenCalledWith('n2');
	});

	it('without requests the badge shows no count', () => {
		render(ApprovalsInbox, { pending: [], nameOf: () => '', onanswer: vi.fn() });
		expect(screen.queryByTestId('approvals-count')).toBeNull();
		expect(screen.getByRole('button', { name: 'Approvals: 0 waiting' })).toBeTruthy();
	});
});

describe('AuditView', () => {
	it('shows a node\u2019s audit newest first and loads older pages', async () => {
		const row = (id: number, source: string, name: string, extra = {}) => ({
			id, node_id: 'n', source, name, started_at: '2026-01-01T00:00:00Z', completed_at: '2026-01-01T00:00:01Z', duration_ms: 1000, ...extra
		});
		const load = vi
			.fn()
			.mockResolvedValueOnce({ data: [row(3, 'api', 'list_children', { result: { children: 2 } }), row(2, 'command', 'command', { parameters: { cmd: 'false' }, error: 'exit 1' })], next_before: 2 })
			.mockResolvedValueOnce({ data: [row(1, 'tool', 'read_file', { parameters: { path: 'a.go' } })], next_before: 0 });
		render(AuditView, { nodeId: 'n', load });
		await waitFor(() => expect(screen.getAllByTestId('audit-row')).toHaveLength(2));
		const rows = screen.getAllByTestId('audit-row');
		expect(rows[0].textContent).toContain('list_children');
		expect(rows[1].classList.contains('failed')).toBe(true);
		expect(rows[1].textContent).toContain('exit 1');
		await fireEvent.click(screen.getByRole('button', { name: 'Load older' }));
		await waitFor(() => expect(screen.getAllByTestId('audit-row')).toHaveLength(3));
		expect(load).toHaveBeenLastCalledWith('n', 2);
		expect(screen.queryByRole('button', { name: 'Load older' })).toBeNull();
	});

	it('issue 27.8: shows parameters and results as a person reads them, not escaped JSON; a long one opens', async () => {
		const script = 'set -e\ngo build ./...\ngo vet ./...';
		const long = 'line\n'.repeat(100);
		const load = vi.fn().mockResolvedValue({
			data: [
				{ id: 2, node_id: 'n', source: 'command', name: 'command', parameters: { cmd: script, timeout: 60 }, result: { stdout: long }, started_at: '2026-01-01T00:00:00Z', completed_at: '2026-01-01T00:00:01Z', duration_ms: 5 }
			],
			next_before: 0
		});
		render(AuditView, { nodeId: 'n', load });
		const row = (await screen.findAllByTestId('audit-row'))[0];
		const [params, result] = [...row.querySelectorAll('td.mono')] as HTMLElement[];
		expect(params.textContent).toBe('cmd: set -e\ngo build ./...\ngo vet ./...\ntimeout: 60');
		expect(params.textContent).not.toContain('\\n');
		expect(result.textContent).toContain('…');
		await fireEvent.click(screen.getByRole('button', { name: 'more' }));
		expect(result.textContent).toContain('stdout: ' + long);
	});
});
