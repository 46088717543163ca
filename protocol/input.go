package protocol

// Senders of a message input.
const (
	FromUser   = "user"
	FromParent = "parent"
	FromSystem = "system"
)

// Signal actions.
const (
	ActionStop   = "stop"
	ActionPause  = "pause"
	ActionResume = "resume"
)

// InputTypes lists the input type names in the order of the spec.
func InputTypes() []string { return []string{TypeMessage, TypeSignal} }

// Input is one line written to an agent's stdin. It is implemented by
// MessageInput and SignalInput (value receivers).
type Input interface {
	InputType() string
}

var (
	_ Input = MessageInput{}
	_ Input = SignalInput{}
)

// MessageInput is a message for the agent from the user, its parent agent or
// the system.
type MessageInput struct {
	Type    string `json:"type"`
	From    string `json:"from" jsonschema:"enum=user,enum=parent,enum=system"`
	Content string `json:"content"`
	// FromNode names the agent that sent the message through the agent API:
	// an ancestor (from parent) or a child reporting to its parent (from
	// system). Absent for the user's messages and filepath's own.
	FromNode *NodeRef `json:"from_node,omitempty"`
	// Comment says what the message comments on: lines of a file in the
	// node's changes, selected in the UI's diff. Content quotes them (file,
	// line range and lines) for agents that read only content.
	Comment *DiffComment `json:"comment,omitempty"`
	// Attachments are files the user attached in the chat: already in the
	// node's workspace. Content names them (paths, sizes, types) for agents
	// that read only content.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Attachment is a file attached to a message, in the node's workspace.
type Attachment struct {
	// Path is the file's path below /workspace, with a leading slash.
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MimeType  string `json:"mime_type,omitempty"`
}

// DiffComment names the lines of a file's diff a message comments on.
type DiffComment struct {
	Path string `json:"path"`
	// StartLine and EndLine are 1-based line numbers of the file on Side:
	// "new" (the file as changed) or "old" (before the change).
	StartLine int    `json:"start_line" jsonschema:"minimum=1"`
	EndLine   int    `json:"end_line" jsonschema:"minimum=1"`
	Side      string `json:"side" jsonschema:"enum=old,enum=new"`
	// Section is the part of the changes the diff was in ("uncommitted" or
	// "committed") and Base what it was measured against, so the UI can
	// show the same diff again.
	Section string `json:"section,omitempty" jsonschema:"enum=uncommitted,enum=committed"`
	Base    string `json:"base,omitempty"`
}

// NodeRef names one node of the session's tree.
type NodeRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SignalInput asks the agent to stop, pause or resume.
type SignalInput struct {
	Type   string `json:"type"`
	Action string `json:"action" jsonschema:"enum=stop,enum=pause,enum=resume"`
}

// InputType returns "message".
func (MessageInput) InputType() string { return TypeMessage }

// InputType returns "signal".
func (SignalInput) InputType() string { return TypeSignal }
