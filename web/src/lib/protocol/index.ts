// Protocol and log record types for the UI. Everything here derives from generated.ts (from the Go JSON Schema);
// nothing is hand-copied. Extract keys on the `type` discriminator, so the root names are the only
// names this file relies on.
import type { AgentEvent, AgentInput } from './generated';

export type { AgentEvent, AgentInput };
export type {
	LogRecord,
	EventRecord,
	InputRecord,
	NodeRecord,
	FileRecord,
	ErrorRecord,
	NodeChange,
	FileChange,
	ErrorData,
	SystemRecord,
	SystemData,
	Memory,
	Approval,
	Check,
	AgentNode,
	Session
} from './generated';
type Ev<T extends AgentEvent['type']> = Extract<AgentEvent, { type: T }>;
type In<T extends AgentInput['type']> = Extract<AgentInput, { type: T }>;

export type TextEvent = Ev<'text'>;
export type ToolEvent = Ev<'tool'>;
export type CommandEvent = Ev<'command'>;
export type CommitEvent = Ev<'commit'>;
export type SpawnEvent = Ev<'spawn'>;
export type WorkersEvent = Ev<'workers'>;
export type StatusEvent = Ev<'status'>;
export type HandoffEvent = Ev<'handoff'>;
export type DoneEvent = Ev<'done'>;
export type Worker = WorkersEvent['workers'][number];
export type AgentStatus = StatusEvent['state'];

export type MessageInput = In<'message'>;
export type SignalInput = In<'signal'>;
