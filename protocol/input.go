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
