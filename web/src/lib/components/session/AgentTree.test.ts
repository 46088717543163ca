import { fireEvent, render, screen } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import AgentTree, { clampWidth } from './AgentTree.svelte';
import { threeLevels, node } from '$lib/test/fixtures';

describe('AgentTree', () => {
	it('renders a 3-level hierarchy with the AGENTS header and spawn button', () => {
		render(AgentTree, { nodes: threeLevels() });
		expect(screen.getByText('AGENTS')).toBeTruthy();
		for (const n of ['root', 'plan', 'db', 'api', 'impl', 'jwt']) expect(screen.getByText(n)).toBeTruthy();
		expect(screen.getByRole('button', { name: /spawn/i })).toBeTruthy();
	});

	it('accepts a Map of nodes', () => {
		const m = new Map(threeLevels().map((n) => [n.id, n]));
		render(AgentTree, { nodes: m });
		expect(screen.getByText('jwt')).toBeTruthy();
	});

	it('fires the selection callback and the spawn callback', async () => {
		const onselect = vi.fn();
		const onspawn = vi.fn();
		render(AgentTree, { nodes: threeLevels(), onselect, onspawn });
		await fireEvent.click(screen.getByText('jwt'));
		expect(onselect).toHaveBeenCalledWith('jwt');
		await fireEvent.click(screen.getByRole('button', { name: /spawn/i }));
		expect(onspawn).toHaveBeenCalled();
	});

	it('collapses and expands with the chevron', async () => {
		render(AgentTree, { nodes: threeLevels() });
		await fireEvent.click(screen.getByRole('button', { name: 'Collapse impl' }));
		expect(screen.queryByText('jwt')).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: 'Expand impl' }));
		expect(screen.getByText('jwt')).toBeTruthy();
	});

	const drags = [
		{ name: 'wider is clamped to 360', dx: 500, want: 360 },
		{ name: 'narrower is clamped to 150', dx: -500, want: 150 },
		{ name: 'in range follows the pointer', dx: 40, want: 240 }
	];
	for (const d of drags) {
		it(`resize: ${d.name}`, async () => {
			const { container } = render(AgentTree, { nodes: threeLevels(), width: 200 });
			const handle = screen.getByRole('separator');
			await fireEvent.pointerDown(handle, { clientX: 200, pointerId: 1 });
			await fireEvent.pointerMove(handle, { clientX: 200 + d.dx, pointerId: 1 });
			await fireEvent.pointerUp(handle, { clientX: 200 + d.dx, pointerId: 1 });
			const aside = container.querySelector('aside') as HTMLElement;
			expect(aside.style.width).toBe(`${d.want}px`);
			expect(handle.getAttribute('aria-valuenow')).toBe(String(d.want));
		});
	}

	it('resizes from the keyboard, clamped', async () => {
		render(AgentTree, { nodes: [node('a', null, 'a')], width: 355 });
		const handle = screen.getByRole('separator');
		await fireEvent.keyDown(handle, { key: 'ArrowRight' });
		expect(handle.getAttribute('aria-valuenow')).toBe('360');
	});

	it('clampWidth', () => {
		expect(clampWidth(10)).toBe(150);
		expect(clampWidth(1000)).toBe(360);
		expect(clampWidth(222.4)).toBe(222);
	});
});
