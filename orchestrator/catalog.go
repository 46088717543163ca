package orchestrator

import "strings"

// Agent describes one agent type of the catalog (northstar.md "Agent catalog").
type Agent struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Icon        string `json:"icon"` // lucide icon name
	// DefaultModel is a model id of the agent's provider: an OpenRouter id
	// (vendor/model) for the agents that use OpenRouter (shelley, pi). ""
	// for custom: a BYO agent gets a model only when its node names one.
	DefaultModel string `json:"default_model"`
	// Image is the local image the agent runs in; "" for custom, whose
	// node names its own image.
	Image string `json:"image"`
	// Provider is the LLM provider the agent reaches through the gateway
	// (Provider*): the orchestrator needs that provider's key to start it.
	// "" for agents that bring their own vendor key (amp, cursor) and custom.
	Provider string `json:"provider"`
	// VendorKey is the variable of the vendor key an agent that does not
	// go through the gateway needs (AMP_API_KEY, CURSOR_API_KEY): a secret
	// of the session, given to its container only; its usage is not
	// metered by filepath. "" for the others.
	VendorKey string `json:"vendor_key,omitempty"`
}

// The LLM providers the gateway speaks (GATEWAY.md).
const (
	ProviderOpenRouter = "openrouter" // chat completions
	ProviderAnthropic  = "anthropic"  // Messages
	ProviderOpenAI     = "openai"     // Responses
)

// ProviderKeyEnv names the variable that gives the orchestrator a
// provider's key: FILEPATH_OPENROUTER_API_KEY, ...
func ProviderKeyEnv(provider string) string {
	return "FILEPATH_" + strings.ToUpper(provider) + "_API_KEY"
}

// AgentCustom is the bring-your-own agent type: its node must name an image.
const AgentCustom = "custom"

// AgentImage returns the local image name of a built-in agent type.
func AgentImage(agentType string) string { return "filepath/agent-" + agentType + ":latest" }

// Catalog returns the agent types in display order. The slice is new on each
// call; callers may modify it.
func Catalog() []Agent {
	return []Agent{
		{Type: "shelley", Name: "Shelley", Description: "Full-stack engineering agent. filepath-native reference implementation.", Icon: "shell", DefaultModel: "anthropic/claude-sonnet-4", Image: AgentImage("shelley"), Provider: ProviderOpenRouter},
		{Type: "pi", Name: "Pi", Description: "Research and analysis. Deep dives into docs, APIs, codebases.", Icon: "search", DefaultModel: "anthropic/claude-sonnet-4", Image: AgentImage("pi"), Provider: ProviderOpenRouter},
		{Type: "claude-code", Name: "Claude Code", Description: "Anthropic's agentic coding tool. Complex multi-file changes.", Icon: "bot", DefaultModel: "claude-sonnet-4-5", Image: AgentImage("claude-code"), Provider: ProviderAnthropic},
		{Type: "codex", Name: "Codex", Description: "OpenAI's coding agent. Strong at Python, scripting, data.", Icon: "scroll", DefaultModel: "gpt-5.5", Image: AgentImage("codex"), Provider: ProviderOpenAI},
		{Type: "cursor", Name: "Cursor", Description: "Cursor's agent mode via CLI. IDE-grade code intelligence.", Icon: "mouse-pointer", DefaultModel: "claude-sonnet-4", Image: AgentImage("cursor"), VendorKey: "CURSOR_API_KEY"},
		{Type: "amp", Name: "Amp", Description: "Sourcegraph's agent. Large codebase navigation, cross-repo changes.", Icon: "zap", DefaultModel: "claude-sonnet-4", Image: AgentImage("amp"), VendorKey: "AMP_API_KEY"},
		{Type: AgentCustom, Name: "Custom", Description: "Bring your own agent. Dockerfile that speaks the filepath protocol.", Icon: "box"},
	}
}

// AgentByType returns the catalog entry of agentType and whether it exists.
func AgentByType(agentType string) (Agent, bool) {
	for _, a := range Catalog() {
		if a.Type == agentType {
			return a, true
		}
	}
	return Agent{}, false
}

// VendorKeys returns the variables of every vendor key the catalog's agents
// need (Agent.VendorKey): the names a session secret may have.
func VendorKeys() []string {
	var out []string
	for _, a := range Catalog() {
		if a.VendorKey != "" {
			out = append(out, a.VendorKey)
		}
	}
	return out
}
