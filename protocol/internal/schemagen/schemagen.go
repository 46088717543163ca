// Package schemagen builds the JSON Schemas (draft 2020-12) of FAP events
// and inputs from the Go types of package protocol.
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
