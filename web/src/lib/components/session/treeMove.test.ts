import { createEvent, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import AgentTree from './AgentTree.svelte';
import MoveDialog from './MoveDialog.svelte';
import { moveTarget, zoneAt } from './treeDrag';
import { buildTree } from '$lib/tree';
import { ApiError } from '$lib/api';
import { threeLevels } from '$lib/test/fixtures';

const nodes = () => new Map(threeLevels().map((n) => [n.id, n]));
const row = (id: string) => document.querySelector(`[data-node-id="${id}"]`) as HTMLElement;

// dataTransfer is a minimal stand-in (jsdom has no DataTransfer).
function dt() {
	const data: Record<string, string> = {};
	return { data, effectAllowed: '', dropEffect: '', setData: (k: string, v: string) => (data[k] = v), getData: (k: string) => data[k] ?? '' };
}

// drag drops row `from` onto row `to` at a height in it (0 = top, 1 = bottom).
async function drag(from: string, to: string, at = 0.5) {
	const t = row(to);
	t.getBoundingClientRect = () => ({ top: 100, height: 28, bottom: 128, left: 0, right: 200, width: 200, x: 0, y: 100, toJSON() {} });
	const transfer = dt();
	// jsdom has no DragEvent: the pointer's height is set on the event by hand.
	const at_ = (ev: Event) => Object.defineProperty(ev, 'clientY', { value: 100 + at * 28 });
	await fireEvent.dragStart(row(from), { dataTransfer: transfer });
	await fireEvent(t, at_(createEvent.dragOver(t, { dataTransfer: transfer })));
	const over = t.className;
	await fireEvent(t, at_(createEvent.drop(t, { dataTransfer: transfer })));
	return { over, transfer };
}

describe('moving agents in the tree', () => {
	it('zoneAt: top quarter before, bottom quarter after, the middle into; a root only into', () => {
		const r = { top: 0, height: 100 };
		expect(zoneAt(10, r, false)).toBe('before');
		expect(zoneAt(50, r, false)).toBe('inside');
		expect(zoneAt(90, r, false)).toBe('after');
		expect(zoneAt(10, r, true)).toBe('inside');
		expect(zoneAt(10, { top: 0, height: 0 }, false)).toBe('inside');
	});

	it('moveTarget: into a node is its last child; beside one counts siblings without the dragged node', () => {
		const m = nodes();
		const t = buildTree(m);
		expect(moveTarget(t, m, 'jwt', 'plan', 'inside')).toEqual({ parent_id: 'plan', sort_order: 2 });
		expect(moveTarget(t, m, 'db', 'api', 'after')).toEqual({ parent_id: 'plan', sort_order: 1 });
		expect(moveTarget(t, m, 'api', 'db', 'before')).toEqual({ parent_id: 'plan', sort_order: 0 });
		expect(moveTarget(t, m, 'jwt', 'plan', 'after')).toEqual({ parent_id: 'root', sort_order: 1 });
		expect(moveTarget(t, m, 'plan', 'plan', 'inside')).toBeNull();
		expect(moveTarget(t, m, 'plan', 'root', 'before')).toBeNull();
		// into its own subtree: asked for; the API refuses with the reason
		expect(moveTarget(t, m, 'plan', 'db', 'inside')).toEqual({ parent_id: 'db', sort_order: 0 });
	});

	it('dragging a row onto another asks the API to move it, with a drop marker while over', async () => {
		const onmove = vi.fn().mockResolvedValue(undefined);
		render(AgentTree, { nodes: nodes(), onmove });
		expect(row('root').getAttribute('draggable')).toBeNull(); // the root cannot be moved
		expect(row('jwt').getAttribute('draggable')).toBe('true');
		const { over, transfer } = await drag('jwt', 'plan');
		expect(transfer.data['application/x-filepath-node']).toBe('jwt');
		expect(over).toContain('drop-inside');
		expect(onmove).toHaveBeenCalledWith('jwt', 'plan', 2);
		expect(row('plan').className).not.toContain('drop-inside');

		expect((await drag('db', 'api', 0.9)).over).toContain('drop-after');
		expect(onmove).toHaveBeenLastCalledWith('db', 'plan', 1);
	});

	it('a refused drop shows the API reason above the tree', async () => {
		const onmove = vi.fn().mockRejectedValue(new ApiError(400, 'invalid', 'moving node "plan" under "db" would create a cycle', 'parent_id'));
		render(AgentTree, { nodes: nodes(), onmove });
		await drag('plan', 'db');
		expect((await screen.findByRole('alert')).textContent).toContain('Could not move plan: moving node "plan" under "db" would create a cycle (parent_id)');
		await fireEvent.click(screen.getByRole('button', { name: 'Dismiss' }));
		expect(screen.queryByRole('alert')).toBeNull();
	});

	it('without onmove nothing is draggable', () => {
		render(AgentTree, { nodes: nodes() });
		expect(row('jwt').getAttribute('draggable')).toBeNull();
	});

	it('the Move dialog picks a parent and a position from the keyboard; a refusal keeps it open', async () => {
		const onmove = vi
			.fn()
			.mockRejectedValueOnce(new ApiError(400, 'invalid', 'moving node "plan" under "api" would create a cycle'))
			.mockResolvedValue(undefined);
		const onclose = vi.fn();
		const m = nodes();
		render(MoveDialog, { node: m.get('plan')!, nodes: m, onmove, onclose });
		const dlg = screen.getByRole('dialog', { name: 'Move plan' });
		const radios = within(dlg).getAllByRole('radio') as HTMLInputElement[];
		expect(radios.map((r) => r.value)).toEqual(['root', 'db', 'api', 'impl', 'jwt']); // all but itself, tree order
		expect((within(dlg).getByRole('radio', { name: /root/ }) as HTMLInputElement).checked).toBe(true);
		expect((within(dlg).getByLabelText('Position') as HTMLSelectElement).value).toBe('0'); // where it is: first of root's other children

		await fireEvent.click(within(dlg).getByRole('radio', { name: 'api' }));
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Move' }));
		expect(onmove).toHaveBeenCalledWith('plan', 'api', 0);
		expect((await within(dlg).findByRole('alert')).textContent).toBe('Could not move plan: moving node "plan" under "api" would create a cycle');
		expect(onclose).not.toHaveBeenCalled();

		await fireEvent.click(within(dlg).getByRole('radio', { name: 'impl' }));
		const pos = within(dlg).getByLabelText('Position') as HTMLSelectElement;
		expect([...pos.options].map((o) => o.text)).toEqual(['Last', 'First']);
		await fireEvent.change(pos, { target: { value: '0' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Move' }));
		await waitFor(() => expect(onclose).toHaveBeenCalled());
		expect(onmove).toHaveBeenLastCalledWith('plan', 'impl', 0);
	});
});
