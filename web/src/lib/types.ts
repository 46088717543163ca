// API shapes. The session log record, the node and the session are generated from the Go types in
// protocol/record.go (./protocol/generated.ts); only the catalog and request shapes below are
// written by hand.
import type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check, Approval } from './protocol';

export type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check, Approval };
export type NodeStatus = AgentNode['status'];
export type SessionStatus = Session['status'];

export interface AgentInfo {
	type: string;
	name: string;
	description: string;
	icon: string;
	default_model: string;
	image: string;
	/** The LLM provider it reaches through the gateway ("" for amp, cursor and custom). */
	provider?: string;
	/** The session secret it needs (AMP_API_KEY, CURSOR_API_KEY): it runs on its vendor's
	 * service, and its usage is not metered by filepath. */
	vendor_key?: string;
}

export interface ModelInfo {
	id: string;
	name: string;
}
export interface ModelProvider {
	name: string;
	models: ModelInfo[];
}

/** GET /models: offline when the list is the bundled one (note says why). */
export interface ModelList {
	providers: ModelProvider[];
	offline?: boolean;
	note?: string;
	fetched_at?: string | null;
}

export interface SpawnRequest {
	name: string;
	agent_type: string;
	model: string;
	image?: string;
	parent_id?: string;
	/** shared (default): the child works on its parent's /workspace; fork: on a copy-on-write fork of it. */
	workspace?: 'shared' | 'fork';
}

/** ForkChange is one path a forked agent changed since its fork point (GET .../diff). */
export interface ForkChange {
	path: string;
	op: 'added' | 'changed' | 'deleted';
	kind: 'file' | 'dir' | 'symlink';
	old_size: number;
	new_size: number;
	binary?: boolean;
	/** diff is the unified text diff of a text file. */
	diff?: string;
	/** text_omitted: a text file listed without its diff (the answer's diffs reached their limit). */
	text_omitted?: boolean;
	/** links: the other paths of the same file (hard links), when this path is one of several names. */
	links?: string[];
}

/** ForkInfo describes a forked agent's workspace. */
export interface ForkInfo {
	id: string;
	base: string;
	origin: string;
	session_id: string;
	node_id?: string;
	created_at: string;
}

/** ForkDiff is a forked agent's changes since its fork point. */
export interface ForkDiff {
	fork: ForkInfo;
	changes: ForkChange[];
}

/** MergeConflict is a path both the fork and its parent changed since the fork point. */
export interface MergeConflict {
	path: string;
	fork: ForkChange['op'];
	parent: ForkChange['op'];
}

/** MergeResult is the answer of POST .../merge. */
export interface MergeResult {
	fork: ForkInfo;
	applied: ForkChange[];
	conflicts: MergeConflict[];
}

/** NewSessionBody is the body of POST /sessions. */
export interface NewSessionBody {
	name: string;
	git_repo_url?: string;
	checks?: Check[];
}

/** ApprovalRequest is an agent's request for permission as the inbox API lists it
 * (GET /sessions/{id}/approvals); its system records carry the same fields as Approval. */
export interface ApprovalRequest extends Omit<Approval, 'answered_at'> {
	session_id: string;
	node_id: string;
	node_name: string;
	request_id?: string;
	created_at: string;
	answered_at?: string | null;
}

export type ApprovalDecision = 'approve' | 'deny' | 'always';

/** StoredMemory is a learning agents kept for a user and repository (GET /memories). */
export interface StoredMemory {
	id: string;
	repo: string;
	key: string;
	text: string;
	session_id?: string;
	node_id?: string;
	created_at: string;
	updated_at: string;
}

/** AuditRow is one row of a node's audit (GET /sessions/{id}/nodes/{node}/audit). */
export interface AuditRow {
	id: number;
	node_id: string;
	source: 'tool' | 'command' | 'api';
	name: string;
	parameters?: Record<string, unknown>;
	result?: unknown;
	error?: string;
	started_at: string;
	completed_at: string;
	duration_ms: number;
	seq?: number;
}
