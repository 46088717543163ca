// Tree building from the flat node list (parent_id links) in O(n log n): one pass to index
// children, one sort per sibling list, one post-order pass for leaf counts.
import type { AgentNode } from './types';

export interface TreeIndex {
	roots: AgentNode[];
	children: Map<string, AgentNode[]>;
	/** counts holds leaf completion per node: done leaves / all leaves under it. */
	counts: Map<string, { done: number; total: number }>;
	byName: Map<string, AgentNode>;
}

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

	const counts = new Map<string, { done: number; total: number }>();
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
		if (kids.length === 0) {
			counts.set(top.n.id, { done: top.n.status === 'done' ? 1 : 0, total: 1 });
		} else {
			let done = 0;
			let total = 0;
			for (const k of kids) {
				const c = counts.get(k.id);
				if (c) {
					done += c.done;
					total += c.total;
				}
			}
			counts.set(top.n.id, { done, total });
		}
	}
	return { roots, children, counts, byName };
}
