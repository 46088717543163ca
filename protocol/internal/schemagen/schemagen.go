// Package schemagen builds the JSON Schemas (draft 2020-12) of FAP events and
// inputs and of the session log's records from the Go types of package
// protocol.
package schemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/filepath-dev/filepath/protocol"
)

const idBase = "https://github.com/filepath-dev/filepath/protocol/schema/"

type variant struct {
	value       any
	description string
}

// Event returns the schema of one stdout line (AgentEvent).
func Event() ([]byte, error) {
	return build("event.schema.json", "AgentEvent",
		"One line an agent writes to stdout: a JSON object whose \"type\" selects the event. Unknown fields are allowed and ignored.",
		[]variant{
			{protocol.TextEvent{}, "Prose from the agent; shown as an agent message."},
			{protocol.ToolEvent{}, "A tool call; shown as a collapsible tool block."},
			{protocol.CommandEvent{}, "A shell command; shown as a collapsible command block."},
			{protocol.CommitEvent{}, "A git commit; shown as a commit log entry."},
			{protocol.SpawnEvent{}, "Asks the orchestrator to create a child agent."},
			{protocol.WorkersEvent{}, "The agent's workers and their states; shown as a pill strip."},
			{protocol.StatusEvent{}, "The agent's state and context window use; updates the tree's status dot."},
			{protocol.HandoffEvent{}, "Hands the work over to a next session."},
			{protocol.DoneEvent{}, "The agent has finished; marks the node done."},
		})
}

// Input returns the schema of one stdin line (AgentInput).
func Input() ([]byte, error) {
	return build("input.schema.json", "AgentInput",
		"One line written to an agent's stdin: a JSON object whose \"type\" selects the input. Unknown fields are allowed and ignored.",
		[]variant{
			{protocol.MessageInput{}, "A message from the user, the parent agent or the system."},
			{protocol.SignalInput{}, "Asks the agent to stop, pause or resume."},
		})
}

// recordVariant is one kind of log record and the schema of its data.
type recordVariant struct {
	name, kind  string
	data        *jsonschema.Schema
	description string
}

// Record returns the schema of one session log record (the live stream's
// messages, the API's records) with the node and session shapes the API
// sends. Each kind is its own variant, so the data's shape follows the kind.
func Record() ([]byte, error) {
	const file = "record.schema.json"
	r := &jsonschema.Reflector{ExpandedStruct: true, Anonymous: true}
	defs := jsonschema.Definitions{}
	named := []struct {
		value       any
		description string
	}{
		{protocol.NodeChange{}, "The data of a node record: a node was created, updated, moved or deleted (node is the node after the change; ids, for deleted, every node removed)."},
		{protocol.FileChange{}, "The data of a file record: the net change to one path of the session's filesystem."},
		{protocol.ErrorData{}, "The data of an error record: an invalid agent line (source stdout, with raw), an exit without done (exit, with exit_code and stderr_tail) or a runtime failure (runtime)."},
		{protocol.SystemData{}, "The data of a system record: a block filepath itself adds to a node's chat; type says which."},
		{protocol.Node{}, "One agent of a session's tree."},
		{protocol.Session{}, "An agent session: a tree of nodes and one ordered log."},
	}
	for _, n := range named {
		s := r.Reflect(n.value)
		name := reflect.TypeOf(n.value).Name()
		for k, d := range s.Definitions {
			if k != name {
				defs[k] = d
			}
		}
		s.Version, s.ID, s.Definitions = "", "", nil
		s.Title, s.Description = name, n.description
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			if p.Value.Type == "object" && p.Value.Properties == nil {
				// a free-form object (json.RawMessage): say so, or generators read "no properties"
				p.Value.AdditionalProperties = jsonschema.TrueSchema
			}
		}
		defs[name] = s
	}
	env := r.Reflect(protocol.Record{})
	root := &jsonschema.Schema{
		Version:     jsonschema.Version,
		ID:          jsonschema.ID(idBase + file),
		Title:       "Record",
		Description: "One record of a session's log, as the live stream and the API send it: \"kind\" selects the shape of \"data\".",
		Definitions: defs,
	}
	variants := []recordVariant{
		{"EventRecord", protocol.KindEvent, &jsonschema.Schema{Ref: "event.schema.json"}, "An event the agent wrote to stdout (AgentEvent), stored before anyone sees it."},
		{"InputRecord", protocol.KindInput, &jsonschema.Schema{Ref: "input.schema.json"}, "An input written to the agent's stdin (AgentInput): a message or a signal."},
		{"NodeRecord", protocol.KindNode, &jsonschema.Schema{Ref: "#/$defs/NodeChange"}, "A change to the session's tree."},
		{"FileRecord", protocol.KindFile, &jsonschema.Schema{Ref: "#/$defs/FileChange"}, "A change to the session's filesystem."},
		{"ErrorRecord", protocol.KindError, &jsonschema.Schema{Ref: "#/$defs/ErrorData"}, "A protocol or runtime error, shown in the node's chat."},
		{"SystemRecord", protocol.KindSystem, &jsonschema.Schema{Ref: "#/$defs/SystemData"}, "A block filepath itself adds to a node's chat: a health check, memories, a continuation, an approval."},
	}
	if len(variants) != len(protocol.RecordKinds()) {
		return nil, fmt.Errorf("record variants do not cover the kinds %v", protocol.RecordKinds())
	}
	for _, v := range variants {
		s := *env
		s.Version, s.ID, s.Definitions = "", "", nil
		s.Title, s.Description = v.name, v.description
		s.Properties = jsonschema.NewProperties()
		for p := env.Properties.Oldest(); p != nil; p = p.Next() {
			prop := p.Value
			switch p.Key {
			case "kind":
				prop = &jsonschema.Schema{Type: "string", Const: v.kind}
			case "data":
				prop = v.data
			}
			s.Properties.Set(p.Key, prop)
		}
		defs[v.name] = &s
		root.OneOf = append(root.OneOf, &jsonschema.Schema{Ref: "#/$defs/" + v.name})
	}
	return encode(file, root)
}

func build(file, title, description string, variants []variant) ([]byte, error) {
	root := &jsonschema.Schema{
		Version:     jsonschema.Version,
		ID:          jsonschema.ID(idBase + file),
		Title:       title,
		Description: description,
		Definitions: jsonschema.Definitions{},
	}
	r := &jsonschema.Reflector{
		AllowAdditionalProperties: true,
		DoNotReference:            true,
		ExpandedStruct:            true,
		Anonymous:                 true,
	}
	for _, v := range variants {
		s := r.Reflect(v.value)
		s.Version = ""
		s.Definitions = nil
		name := reflect.TypeOf(v.value).Name()
		s.Title = name
		s.Description = v.description
		typ, ok := s.Properties.Get("type")
		if !ok {
			return nil, fmt.Errorf("%s has no type property", name)
		}
		typ.Const = typeName(v.value)
		root.Definitions[name] = s
		root.OneOf = append(root.OneOf, &jsonschema.Schema{Ref: "#/$defs/" + name})
	}
	return encode(file, root)
}

func encode(file string, root *jsonschema.Schema) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode %s: %w", file, err)
	}
	return buf.Bytes(), nil
}

func typeName(v any) string {
	switch v := v.(type) {
	case protocol.Event:
		return v.EventType()
	case protocol.Input:
		return v.InputType()
	}
	panic(fmt.Sprintf("schemagen: %T is neither an event nor an input", v))
}
