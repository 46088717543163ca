// Drag-and-drop of agents in the tree: where a drop lands and what move it asks the API for.
import type { AgentNode } from '$lib/types';
import type { TreeIndex } from '$lib/tree';

/** Zone is where on a row a drop lands: above it, into it (last child), or below it. */
export type Zone = 'before' | 'inside' | 'after';

/** zoneAt picks the zone from the pointer's height on a row; a root only takes drops into it. */
export function zoneAt(clientY: number, rect: { top: number; height: number }, isRoot: boolean): Zone {
	if (isRoot || !(rect.height > 0)) return 'inside';
	const f = (clientY - rect.top) / rect.height;
	return f < 0.25 ? 'before' : f > 0.75 ? 'after' : 'inside';
}

/** TreeDrag is the drag-and-drop state and handlers AgentTree shares with every row. */
export interface TreeDrag {
	state: { id: string | null; over: string | null; zone: Zone };
	start: (id: string, e: DragEvent) => void;
	drop: (id: string, zone: Zone) => void;
	end: () => void;
}

/** MoveTarget is the body of POST …/nodes/{id}/move. */
export interface MoveTarget {
	parent_id: string;
	sort_order: number;
}

/**
 * moveTarget is the move that dropping `dragged` on `target` in `zone` means: into it as its last
 * child, or next to it among its siblings (the node itself left out when counting positions).
 * null when the drop means nothing (onto itself, or beside a root). A drop into its own subtree
 * is still asked for: the API refuses it with the reason, which the tree shows.
 */
export function moveTarget(tree: TreeIndex, nodes: ReadonlyMap<string, AgentNode>, dragged: string, target: string, zone: Zone): MoveTarget | null {
	if (dragged === target) return null;
	const t = nodes.get(target);
	if (!t) return null;
	const others = (parent: string) => (tree.children.get(parent) ?? []).filter((k) => k.id !== dragged);
	if (zone === 'inside') return { parent_id: target, sort_order: others(target).length };
	if (!t.parent_id) return null;
	const i = others(t.parent_id).findIndex((k) => k.id === target);
	return { parent_id: t.parent_id, sort_order: zone === 'before' ? i : i + 1 };
}
