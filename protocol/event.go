package protocol

import "encoding/json"

// Event type names: the value of "type" on an agent's stdout line.
const (
	TypeText     = "text"
	TypeTool     = "tool"
	TypeCommand  = "command"
	TypeCommit   = "commit"
	TypeSpawn    = "spawn"
	TypeWorkers  = "workers"
	TypeStatus   = "status"
	TypeHandoff  = "handoff"
	TypeDone     = "done"
	TypeMessage  = "message"
	TypeSignal   = "signal"
	typesOfEvent = "text, tool, command, commit, spawn, workers, status, handoff, done"
	typesOfInput = "message, signal"
)

// Step status of a tool or command event.
const (
	StepStart = "start"
	StepDone  = "done"
	StepError = "error"
)

// Agent states, used by status events and by the workers of a workers event.
const (
	StateIdle     = "idle"
	StateThinking = "thinking"
	StateRunning  = "running"
	StateDone     = "done"
	StateError    = "error"
)

// EventTypes lists the event type names in the order of the spec.
func EventTypes() []string {
	return []string{TypeText, TypeTool, TypeCommand, TypeCommit, TypeSpawn, TypeWorkers, TypeStatus, TypeHandoff, TypeDone}
}

// Event is one line an agent writes to stdout. It is implemented by the nine
// event structs of this package (value receivers).
type Event interface {
	EventType() string
}

var (
	_ Event = TextEvent{}
	_ Event = ToolEvent{}
	_ Event = CommandEvent{}
	_ Event = CommitEvent{}
	_ Event = SpawnEvent{}
	_ Event = WorkersEvent{}
	_ Event = StatusEvent{}
	_ Event = HandoffEvent{}
	_ Event = DoneEvent{}
)

// TextEvent is prose from the agent.
type TextEvent struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// ToolEvent reports a tool call (read, write, search, ...).
type ToolEvent struct {
	Type   string  `json:"type"`
	Name   string  `json:"name"`
	Path   *string `json:"path,omitempty"`
	Status string  `json:"status" jsonschema:"enum=start,enum=done,enum=error"`
	Output *string `json:"output,omitempty"`
}

// CommandEvent reports a shell command.
type CommandEvent struct {
	Type   string `json:"type"`
	Cmd    string `json:"cmd"`
	Status string `json:"status" jsonschema:"enum=start,enum=done,enum=error"`
	// Exit is any finite JSON number (the spec says z.number()), usually the
	// process exit code. The schema bounds it to the float64 range because a
	// number beyond it cannot be represented by JSON.parse or by this package.
	Exit   *float64 `json:"exit,omitempty" jsonschema:"minimum=-1.7976931348623157e308,maximum=1.7976931348623157e308"`
	Stdout *string  `json:"stdout,omitempty"`
	Stderr *string  `json:"stderr,omitempty"`
}

// CommitEvent reports a git commit made by the agent.
type CommitEvent struct {
	Type    string `json:"type"`
	Hash    string `json:"hash"`
	Message string `json:"message"`
}

// SpawnEvent asks the orchestrator to create a child agent.
type SpawnEvent struct {
	Type  string  `json:"type"`
	Name  string  `json:"name"`
	Agent string  `json:"agent"`
	Model string  `json:"model"`
	Task  *string `json:"task,omitempty"`
	// Workspace is what the child's /workspace is: "shared" (the default,
	// the parent's workspace) or "fork" (a copy-on-write copy of the
	// parent's, which the parent can diff and merge).
	Workspace *string `json:"workspace,omitempty" jsonschema:"enum=shared,enum=fork"`
}

// Spawn workspace modes (SpawnEvent.Workspace).
const (
	WorkspaceShared = "shared"
	WorkspaceFork   = "fork"
)

// WorkspaceModes lists the values of SpawnEvent.Workspace.
func WorkspaceModes() []string { return []string{WorkspaceShared, WorkspaceFork} }

// WorkersEvent reports the agent's workers and their states.
type WorkersEvent struct {
	Type    string   `json:"type"`
	Workers []Worker `json:"workers"`
}

// Worker is one entry of a WorkersEvent.
type Worker struct {
	Name   string `json:"name"`
	Status string `json:"status" jsonschema:"enum=idle,enum=thinking,enum=running,enum=done,enum=error"`
}

// StatusEvent reports the agent's state and, optionally, how full its
// context window is (0 to 1).
type StatusEvent struct {
	Type       string   `json:"type"`
	State      string   `json:"state" jsonschema:"enum=idle,enum=thinking,enum=running,enum=done,enum=error"`
	ContextPct *float64 `json:"context_pct,omitempty" jsonschema:"minimum=0,maximum=1"`
}

// HandoffEvent hands the work over to a next session, with a summary.
type HandoffEvent struct {
	Type    string `json:"type"`
	Summary string `json:"summary"`
}

// DoneEvent says the agent has finished.
type DoneEvent struct {
	Type    string  `json:"type"`
	Summary *string `json:"summary,omitempty"`
}

// EventType returns "text".
func (TextEvent) EventType() string { return TypeText }

// EventType returns "tool".
func (ToolEvent) EventType() string { return TypeTool }

// EventType returns "command".
func (CommandEvent) EventType() string { return TypeCommand }

// EventType returns "commit".
func (CommitEvent) EventType() string { return TypeCommit }

// EventType returns "spawn".
func (SpawnEvent) EventType() string { return TypeSpawn }

// EventType returns "workers".
func (WorkersEvent) EventType() string { return TypeWorkers }

// EventType returns "status".
func (StatusEvent) EventType() string { return TypeStatus }

// EventType returns "handoff".
func (HandoffEvent) EventType() string { return TypeHandoff }

// EventType returns "done".
func (DoneEvent) EventType() string { return TypeDone }

// MarshalJSON writes a nil Workers as [] (the schema requires an array).
func (e WorkersEvent) MarshalJSON() ([]byte, error) {
	type plain WorkersEvent
	if e.Workers == nil {
		e.Workers = []Worker{}
	}
	return json.Marshal(plain(e))
}
