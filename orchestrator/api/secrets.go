package api

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
)

// Session secrets: the vendor keys of agents that do not go through the
// gateway (orchestrator.Agent.VendorKey). Set and listed by name; a value is
// never answered, logged or recorded: the runner gives it to the session's
// containers of the agent that needs it, as an environment variable.

// SetSecretRequest is the body of PUT /sessions/{id}/secrets/{name}.
type SetSecretRequest struct {
	Value *string `json:"value" jsonschema:"writeOnly" jsonschema_description:"the key; write-only: never answered"`
}

func (s *Server) putSecret(c echo.Context) (collab.SecretInfo, error) {
	var req SetSecretRequest
	if err := decodeJSON(c, &req); err != nil {
		return collab.SecretInfo{}, err
	}
	if req.Value == nil {
		return collab.SecretInfo{}, orchestrator.FieldErrorf("value", "field \"value\" is required")
	}
	return s.collab.SetSessionSecret(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("name"), *req.Value)
}

func (s *Server) listSecrets(c echo.Context) (listBody[collab.SecretInfo], error) {
	infos, err := s.collab.SessionSecrets(c.Request().Context(), user(c).ID, c.Param("id"))
	return list(infos), err
}

func (s *Server) deleteSecret(c echo.Context) error {
	if err := s.collab.DeleteSessionSecret(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// needVendorKey refuses a node of an agent whose vendor key the session
// does not hold, naming the key and how to give it.
func (s *Server) needVendorKey(c echo.Context, sessionID, agentType string) error {
	agent, ok := orchestrator.AgentByType(agentType)
	if !ok || agent.VendorKey == "" {
		return nil
	}
	infos, err := s.collab.SessionSecrets(c.Request().Context(), user(c).ID, sessionID)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(infos, func(in collab.SecretInfo) bool { return in.Name == agent.VendorKey }) {
		return nil
	}
	return orchestrator.FieldErrorf("agent_type", "the %s agent runs on %s's own service and needs %s: set it on the session first (PUT /api/v1/sessions/%s/secrets/%s with {\"value\": ...}, or in the spawn dialog)",
		agent.Type, agent.Name, agent.VendorKey, sessionID, agent.VendorKey)
}
