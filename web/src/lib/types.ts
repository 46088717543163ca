// API shapes. The session log record, the node and the session are generated from the Go types in
// protocol/record.go (./protocol/generated.ts); only the catalog and request shapes below are
// written by hand.
import type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check } from './protocol';

export type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check };
export type NodeStatus = AgentNode['status'];
export type SessionStatus = Session['status'];

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

/** NewSessionBody is the body of POST /sessions. */
export interface NewSessionBody {
	name: string;
	git_repo_url?: string;
	checks?: Check[];
}
