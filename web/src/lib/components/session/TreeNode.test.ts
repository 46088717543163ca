import { fireEvent, render, screen } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import TreeNode from './TreeNode.svelte';
import { buildTree } from '$lib/tree';
import { node, threeLevels } from '$lib/test/fixtures';

describe('TreeNode', () => {
	const nodes = threeLevels();
	const tree = buildTree(nodes);

	it('renders the nested demo data with counts', () => {
		render(TreeNode, { node: nodes[0], selectedId: null, tree, collapsed: new Set<string>() });
		for (const n of ['root', 'plan', 'db', 'api', 'impl', 'jwt']) expect(screen.getByText(n)).toBeTruthy();
		// root: leaves db(done), api, jwt → 1/3; plan: db(done), api → 1/2
		expect(screen.getByText('1/3')).toBeTruthy();
		expect(screen.getByText('1/2')).toBeTruthy();
	});

	it('click selects', async () => {
		const onselect = vi.fn();
		render(TreeNode, { node: nodes[0], selectedId: 'plan', tree, collapsed: new Set<string>(), onselect });
		await fireEvent.click(screen.getByText('api'));
		expect(onselect).toHaveBeenCalledWith('api');
		const row = document.querySelector('[data-node-id="plan"]')!;
		expect(row.classList.contains('selected')).toBe(true);
	});

	it('chevron toggles and collapsed hides children', async () => {
		const ontoggle = vi.fn();
		const { rerender } = render(TreeNode, { node: nodes[0], selectedId: null, tree, collapsed: new Set<string>(), ontoggle });
		await fireEvent.click(screen.getByRole('button', { name: 'Collapse plan' }));
		expect(ontoggle).toHaveBeenCalledWith('plan');
		await rerender({ collapsed: new Set(['plan']) });
		expect(screen.queryByText('db')).toBeNull();
		expect(screen.getByRole('button', { name: 'Expand plan' })).toBeTruthy();
	});

	it('a parent row shows its subtree\'s tokens, and its dot when an agent below it works', () => {
		const quiet = threeLevels().map((n) => ({ ...n, status: n.id === 'db' ? ('running' as const) : ('idle' as const), tokens: 1500 }));
		render(TreeNode, { node: quiet[0], selectedId: null, tree: buildTree(quiet), collapsed: new Set<string>() });
		const row = (id: string) => document.querySelector(`[data-node-id="${id}"]`) as HTMLElement;
		expect(row('root').querySelector('.tokens')!.textContent).toBe('9.0k'); // six nodes of 1500
		expect(row('plan').querySelector('.tokens')!.textContent).toBe('4.5k');
		expect(row('db').querySelector('.tokens')).toBeNull(); // a leaf: its own tokens are in its header
		const dot = (id: string) => row(id).querySelector('.dot') as HTMLElement;
		expect(dot('root').dataset.descendants).toBe('active');
		expect(dot('plan').dataset.descendants).toBe('active');
		expect(dot('plan').getAttribute('aria-label')).toBe('Idle, agents below it working');
		expect(dot('impl').dataset.descendants).toBeUndefined();
		expect(dot('db').dataset.descendants).toBeUndefined();
	});

	it('issue 27.1: a node the server says is paused shows a paused dot, whatever it said last', () => {
		const ns = nodes.map((n) => (n.id === 'api' ? { ...n, status: 'paused' as const } : n));
		render(TreeNode, { node: ns[0], selectedId: null, tree: buildTree(ns), collapsed: new Set<string>() });
		const dot = (id: string) => document.querySelector(`[data-node-id="${id}"] .dot`) as HTMLElement;
		expect(dot('api').dataset.status).toBe('paused');
		expect(dot('api').getAttribute('aria-label')).toBe('Paused');
		expect(dot('plan').dataset.status).toBe('done');
	});

	it('issue 27.3: a stopped leaf is not counted done, and the count says how the others ended', () => {
		const ns = [node('p', null, 'p', 'idle'), node('x', 'p', 'x', 'done', { sort_order: 0 }), node('y', 'p', 'y', 'stopped', { sort_order: 1 })];
		render(TreeNode, { node: ns[0], selectedId: null, tree: buildTree(ns), collapsed: new Set<string>() });
		const count = document.querySelector('[data-node-id="p"] .count') as HTMLElement;
		expect(count.textContent).toBe('1/2');
		expect(count.classList.contains('complete')).toBe(false);
		expect(count.title).toMatch(/1 done, 1 stopped, of 2/);
		const dot = document.querySelector('[data-node-id="y"] .dot') as HTMLElement;
		expect(dot.getAttribute('aria-label')).toBe('Stopped');
		expect(dot.classList.contains('square')).toBe(true);
	});

	it('issue 27.8: a node waiting for an approval has a badge in the tree', () => {
		render(TreeNode, { node: nodes[0], selectedId: null, tree, collapsed: new Set<string>(), waiting: (id: string) => (id === 'api' ? 2 : 0) });
		const badge = document.querySelector('[data-node-id="api"] [data-testid=needs-you]') as HTMLElement;
		expect(badge.textContent).toContain('2');
		expect(document.querySelectorAll('[data-testid=needs-you]')).toHaveLength(1);
	});
	it('issue 21: a node with a pull request links to it from its row (one link, also after the PR is updated)', async () => {
		const pr = { forge: 'github' as const, url: 'https://github.com/o/r/pull/7', number: 7, branch: 'filepath/api', base: 'main' };
		const ns = nodes.map((n) => (n.id === 'api' ? { ...n, pull_request: pr } : n));
		const { rerender } = render(TreeNode, { node: ns[0], selectedId: null, tree: buildTree(ns), collapsed: new Set<string>() });
		const links = () => [...document.querySelectorAll('[data-testid=pr-link]')] as HTMLAnchorElement[];
		expect(links()).toHaveLength(1);
		const a = document.querySelector('[data-node-id="api"] [data-testid=pr-link]') as HTMLAnchorElement;
		expect(a.textContent).toBe('PR #7');
		expect(a.href).toBe(pr.url);
		expect(a.target).toBe('_blank');
		expect(a.title).toContain('filepath/api into main');
		// a second push updated the same pull request: the node record carries the same link
		const again = ns.map((n) => (n.id === 'api' ? { ...n, status: 'done' as const, pull_request: { ...pr } } : n));
		await rerender({ node: again[0], tree: buildTree(again) });
		expect(links()).toHaveLength(1);
		expect(links()[0].href).toBe(pr.url);
		// GitLab's are merge requests
		const gl = nodes.map((n) => (n.id === 'db' ? { ...n, pull_request: { ...pr, forge: 'gitlab' as const, number: 3, url: 'https://gitlab.com/o/r/-/merge_requests/3' } } : n));
		await rerender({ node: gl[0], tree: buildTree(gl) });
		expect(links().map((l) => l.textContent)).toEqual(['MR !3']);
	});
});
