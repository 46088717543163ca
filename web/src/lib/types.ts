// API shapes (CONTRACTS.md "Store API" domain JSON). Protocol payloads come from ./protocol.
import type { AgentEvent, AgentInput, AgentStatus } from './protocol';

export type NodeStatus = AgentStatus;
export type SessionStatus = 'draft' | 'running' | 'paused' | 'stopped' | 'error';

export interface Session {
	id: string;
	user_id: string;
	name: string;
	git_repo_url: string | null;
	status: SessionStatus;
	root_node_id: string | null;
	started_at: string | null;
	created_at: string;
	updated_at: string;
	node_count: number;
	last_activity: string;
}

export interface AgentNode {
	id: string;
	session_id: string;
	parent_id: string | null;
	name: string;
	agent_type: string;
	model: string;
	image: string;
	status: NodeStatus;
	context_pct: number | null;
	config: Record<string, unknown>;
	container_id: string;
	sort_order: number;
	tokens: number;
	created_at: string;
	updated_at: string;
	done?: number;
	total?: number;
}

export interface NodeOpData {
	op: 'created' | 'updated' | 'moved' | 'deleted';
	node: AgentNode;
	ids?: string[];
}
export interface FileOpData {
	op: 'created' | 'modified' | 'deleted';
	path: string;
	size: number;
}
export interface ErrorData {
	message: string;
	raw?: string;
	source?: 'stdout' | 'exit' | 'runtime' | 'clone' | string;
	exit_code?: number;
	stderr_tail?: string;
}

interface RecordBase {
	seq: number;
	node_id: string;
	at: string;
}
export type LogRecord =
	| (RecordBase & { kind: 'event'; data: AgentEvent })
	| (RecordBase & { kind: 'input'; data: AgentInput })
	| (RecordBase & { kind: 'node'; data: NodeOpData })
	| (RecordBase & { kind: 'file'; data: FileOpData })
	| (RecordBase & { kind: 'error'; data: ErrorData });

export interface AgentInfo {
	type: string;
	name: string;
	description: string;
	icon: string;
	default_model: string;
	image: string;
}

export interface ModelInfo {
	id: string;
	name: string;
}
export interface ModelProvider {
	name: string;
	models: ModelInfo[];
}

export interface SpawnRequest {
	name: string;
	agent_type: string;
	model: string;
	image?: string;
	parent_id?: string;
}
