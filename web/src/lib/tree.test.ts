import { describe, expect, it } from 'vitest';
import { buildTree } from './tree';
import { node, threeLevels } from './test/fixtures';

describe('buildTree', () => {
	it('indexes children in sort order and counts done leaves', () => {
		const t = buildTree(threeLevels());
		expect(t.roots.map((n) => n.id)).toEqual(['root']);
		expect(t.children.get('root')!.map((n) => n.id)).toEqual(['plan', 'impl']);
		expect(t.counts.get('root')).toEqual({ done: 1, total: 3, stopped: 0, failed: 1 });
		expect(t.counts.get('plan')).toEqual({ done: 1, total: 2, stopped: 0, failed: 0 });
		expect(t.counts.get('jwt')).toEqual({ done: 0, total: 1, stopped: 0, failed: 1 });
	});
	it('issue 27.3: a stopped, a lost or a paused leaf is not done; stopped and failed are counted apart', () => {
		const t = buildTree([
			node('r', null, 'r', 'idle'),
			node('a', 'r', 'a', 'done', { sort_order: 0 }),
			node('b', 'r', 'b', 'stopped', { sort_order: 1 }),
			node('c', 'r', 'c', 'lost', { sort_order: 2 }),
			node('d', 'r', 'd', 'paused', { sort_order: 3 }),
			node('e', 'r', 'e', 'error', { sort_order: 4 })
		]);
		expect(t.counts.get('r')).toEqual({ done: 1, total: 5, stopped: 1, failed: 2 });
	});
	it('issue 27.7: several top-level agents are roots in their order', () => {
		const t = buildTree([node('b', null, 'b', 'idle', { sort_order: 1 }), node('a', null, 'a', 'idle', { sort_order: 0 }), node('k', 'b', 'k')]);
		expect(t.roots.map((n) => n.id)).toEqual(['a', 'b']);
		expect(t.children.get('b')!.map((n) => n.id)).toEqual(['k']);
	});
	it('rolls up tokens, cost and whether a descendant is active', () => {
		const nodes = threeLevels().map((n, i) => ({ ...n, tokens: 10 ** i, cost_usd: 2 ** i }));
		const t = buildTree(nodes);
		// root 1, plan 10, db 100, api 1000 (thinking), impl 10000 (running), jwt 100000; cost 1, 2, 4, 8, 16, 32
		expect(t.rollups.get('root')).toEqual({ tokens: 111111, cost: 63, active: true });
		expect(t.rollups.get('plan')).toEqual({ tokens: 1110, cost: 14, active: true });
		expect(t.rollups.get('impl')).toEqual({ tokens: 110000, cost: 48, active: false });
		expect(t.rollups.get('api')).toEqual({ tokens: 1000, cost: 8, active: false });
	});
	it('treats a node with a missing parent as a root and survives a cycle', () => {
		const t = buildTree([node('a', 'gone', 'a'), node('b', 'c', 'b'), node('c', 'b', 'c')]);
		expect(t.roots.map((n) => n.id)).toEqual(['a']);
	});
	it('handles 500 nodes in a deep chain', () => {
		const nodes = Array.from({ length: 500 }, (_, i) => node(`n${i}`, i ? `n${i - 1}` : null, `n${i}`, i === 499 ? 'done' : 'idle'));
		const t = buildTree(nodes);
		expect(t.counts.get('n0')).toEqual({ done: 1, total: 1, stopped: 0, failed: 0 });
	});
});
