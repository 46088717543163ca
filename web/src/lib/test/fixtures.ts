// Test fixtures (imported only by *.test.ts files).
import type { AgentNode, LogRecord } from '$lib/types';

let seq = 0;
export function resetSeq(n = 0) {
	seq = n;
}
export function node(id: string, parent: string | null, name: string, status: AgentNode['status'] = 'idle', extra: Partial<AgentNode> = {}): AgentNode {
	return {
		id,
		session_id: 's1',
		parent_id: parent,
		name,
		agent_type: 'claude-code',
		model: 'claude-sonnet-4',
		image: '',
		status,
		workspace: 'shared',
		context_pct: null,
		config: {},
		container_id: '',
		sort_order: 0,
		tokens: 0,
		cost_usd: 0,
		exit_code: null,
		created_at: '2026-01-01T00:00:00Z',
		updated_at: '2026-01-01T00:00:00Z',
		done: status === 'done' ? 1 : 0,
		total: 1,
		generation: 1,
		subtree_tokens: 0,
		subtree_cost_usd: 0,
		descendant_active: false,
		...extra
	};
}
export function ev(nodeId: string, data: Record<string, unknown>, s = ++seq): LogRecord {
	return { seq: s, kind: 'event', node_id: nodeId, at: '2026-01-01T00:00:00Z', data } as unknown as LogRecord;
}
export function input(nodeId: string, data: Record<string, unknown>, s = ++seq): LogRecord {
	return { seq: s, kind: 'input', node_id: nodeId, at: '2026-01-01T00:00:00Z', data } as unknown as LogRecord;
}
export function err(nodeId: string, data: Record<string, unknown>, s = ++seq): LogRecord {
	return { seq: s, kind: 'error', node_id: nodeId, at: '2026-01-01T00:00:00Z', data } as unknown as LogRecord;
}
export function sys(nodeId: string, data: Record<string, unknown>, s = ++seq): LogRecord {
	return { seq: s, kind: 'system', node_id: nodeId, at: '2026-01-01T00:00:00Z', data } as unknown as LogRecord;
}
export function fileRec(nodeId: string, data: Record<string, unknown>, s = ++seq): LogRecord {
	return { seq: s, kind: 'file', node_id: nodeId, at: '2026-01-01T00:00:00Z', data } as unknown as LogRecord;
}
export function nodeRec(op: string, n: AgentNode, s = ++seq, ids?: string[]): LogRecord {
	return { seq: s, kind: 'node', node_id: '', at: '2026-01-01T00:00:00Z', data: { op, node: n, ids } } as unknown as LogRecord;
}

/** threeLevels: root → (plan → db, api), (impl → jwt) */
export function threeLevels(): AgentNode[] {
	return [
		node('root', null, 'root', 'running'),
		node('plan', 'root', 'plan', 'done', { sort_order: 1 }),
		node('db', 'plan', 'db', 'done', { sort_order: 1 }),
		node('api', 'plan', 'api', 'thinking', { sort_order: 2 }),
		node('impl', 'root', 'impl', 'running', { sort_order: 2 }),
		node('jwt', 'impl', 'jwt', 'error', { sort_order: 1 })
	];
}
