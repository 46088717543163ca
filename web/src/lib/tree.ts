// Tree building from the flat node list (parent_id links) in O(n log n): one pass to index
// children, one sort per sibling list, one post-order pass for leaf counts and roll-ups. The
// server computes the same roll-ups (done/total, subtree_tokens, descendant_active on each node),
// but a node record carries only the node that changed: its ancestors' values are recomputed here
// from the live nodes.
import type { AgentNode } from './types';

/** Rollup is what a node's subtree adds up to. */
export interface Rollup {
	/** tokens adds the tokens of the node and its descendants. */
	tokens: number;
	/** cost adds the US dollars (cost_usd) of the node and its descendants. */
	cost: number;
	/** active: a descendant (not the node itself) is running or thinking. */
	active: boolean;
}

export interface TreeIndex {
	roots: AgentNode[];
	children: Map<string, AgentNode[]>;
	/** counts holds leaf completion per node: done leaves / all leaves under it, and of the
	 * others how many were stopped and how many failed (error or lost). */
	counts: Map<string, Counts>;
	rollups: Map<string, Rollup>;
	byName: Map<string, AgentNode>;
}

/** Counts is how the leaves of a subtree ended so far. */
export interface Counts {
	done: number;
	total: number;
	stopped: number;
	failed: number;
}

const isActive = (n: AgentNode) => n.status === 'running' || n.status === 'thinking';

function order(a: AgentNode, b: AgentNode) {
	return a.sort_order - b.sort_order || (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id.localeCompare(b.id);
}

export function buildTree(nodes: ReadonlyMap<string, AgentNode> | Iterable<AgentNode>): TreeIndex {
	const all = nodes instanceof Map ? [...nodes.values()] : [...(nodes as Iterable<AgentNode>)];
	const ids = new Set(all.map((n) => n.id));
	const children = new Map<string, AgentNode[]>();
	const roots: AgentNode[] = [];
	const byName = new Map<string, AgentNode>();
	for (const n of all) {
		if (!byName.has(n.name)) byName.set(n.name, n);
		if (n.parent_id && ids.has(n.parent_id) && n.parent_id !== n.id) {
			let c = children.get(n.parent_id);
			if (!c) children.set(n.parent_id, (c = []));
			c.push(n);
		} else roots.push(n);
	}
	roots.sort(order);
	for (const c of children.values()) c.sort(order);

	const counts = new Map<string, Counts>();
	const rollups = new Map<string, Rollup>();
	// Iterative post-order so a deep chain cannot overflow the stack.
	const stack: { n: AgentNode; i: number }[] = roots.map((n) => ({ n, i: 0 })).reverse();
	const seen = new Set<string>();
	while (stack.length) {
		const top = stack[stack.length - 1];
		const kids = children.get(top.n.id) ?? [];
		if (top.i < kids.length) {
			const k = kids[top.i++];
			if (!seen.has(k.id)) {
				seen.add(k.id);
				stack.push({ n: k, i: 0 });
			}
			continue;
		}
		stack.pop();
		let tokens = top.n.tokens ?? 0;
		let cost = top.n.cost_usd ?? 0;
		let active = false;
		for (const k of kids) {
			const r = rollups.get(k.id);
			if (r) {
				tokens += r.tokens;
				cost += r.cost;
				active = active || r.active || isActive(k);
			}
		}
		rollups.set(top.n.id, { tokens, cost, active });
		if (kids.length === 0) {
			const st = top.n.status;
			counts.set(top.n.id, { done: st === 'done' ? 1 : 0, total: 1, stopped: st === 'stopped' ? 1 : 0, failed: st === 'error' || st === 'lost' ? 1 : 0 });
		} else {
			const sum: Counts = { done: 0, total: 0, stopped: 0, failed: 0 };
			for (const k of kids) {
				const c = counts.get(k.id);
				if (c) {
					sum.done += c.done;
					sum.total += c.total;
					sum.stopped += c.stopped;
					sum.failed += c.failed;
				}
			}
			counts.set(top.n.id, sum);
		}
	}
	return { roots, children, counts, rollups, byName };
}
