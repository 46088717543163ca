// API shapes, generated: the session log record, the node and the session from the Go types in
// protocol/record.go (./protocol/generated.ts); the API's requests and answers from the Go types of
// its routes, through the OpenAPI document orchestrator/api/openapi.json (./openapi/generated.ts).
// The names below are the ones the components use.
import type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check, Approval } from './protocol';
import type { AgentInfo, AnswerApprovalRequest, CreateNodeRequest, CreateSessionRequest, Model, ToolCall } from './openapi/generated';

export type { AgentNode, LogRecord, NodeChange, FileChange, ErrorData, Session, SystemData, Check, Approval };
export type NodeStatus = AgentNode['status'];
export type SessionStatus = Session['status'];

export type {
	ModelList,
	ModelProvider,
	ForkChange,
	ForkInfo,
	ForkDiff,
	MergeConflict,
	MergeResult,
	ApprovalRequest,
	StoredMemory
} from './openapi/generated';

/** AgentInfo is an agent of the catalog (GET /agents), with whether it can run on this server. */
export type { AgentInfo };
/** ModelInfo is a model of GET /models. */
export type ModelInfo = Model;
/** SpawnRequest is the body of POST /sessions/{id}/nodes. */
export type SpawnRequest = CreateNodeRequest;
/** NewSessionBody is the body of POST /sessions. */
export type NewSessionBody = CreateSessionRequest;
/** ApprovalDecision is the answer to an agent's request for permission. */
export type ApprovalDecision = AnswerApprovalRequest['decision'];
/** AuditRow is one row of a node's audit (GET /sessions/{id}/nodes/{node}/audit). */
export type AuditRow = ToolCall;
