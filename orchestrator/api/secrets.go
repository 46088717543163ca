package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// Secrets (orchestrator/store/secrets): the user's, and a session's own
// that override them: vendor keys of agents that do not go through the
// gateway (orchestrator.Agent.VendorKey), git credentials, SSH keys, forge
// tokens. Set, listed and deleted by name; a value is write-only: never
// answered, logged or recorded. Vendor keys reach only the containers of
// the agent that needs them; the others never enter a container (the
// orchestrator pushes and calls the forge itself).
func secretRoutes() []route {
	const what = "a vendor key an agent needs (AMP_API_KEY, CURSOR_API_KEY: kind vendor), a git credential over HTTPS (git_https: username and password or token), an SSH private key (git_ssh), or a GitHub or GitLab token (github_token, gitlab_token: the forge's API, and git over HTTPS to its host)"
	return []route{
		op(http.MethodGet, "/secrets", (*Server).listUserSecrets, opDoc{summary: "Your secrets, for every session, by name: kinds, hosts, dates, never a value", status: 200}),
		op(http.MethodPut, "/secrets/:name", (*Server).putUserSecret, opDoc{summary: "Set (or rotate) one of your secrets: " + what + "; stored encrypted", status: 200, req: SetSecretRequest{}}),
		{http.MethodDelete, "/secrets/:name", (*Server).deleteUserSecret, opDoc{summary: "Delete one of your secrets", status: 204}},
		op(http.MethodGet, "/sessions/:id/secrets", (*Server).listSecrets, opDoc{summary: "The secrets the session's work uses, by name: its own (scope session) and yours it does not override (scope user); values are never answered", status: 200}),
		op(http.MethodPut, "/sessions/:id/secrets/:name", (*Server).putSecret, opDoc{summary: "Set a secret of the session only, over yours of the same name: " + what + "; stored encrypted", status: 200, req: SetSecretRequest{}}),
		{http.MethodDelete, "/sessions/:id/secrets/:name", (*Server).deleteSecret, opDoc{summary: "Delete a secret of the session (yours of the same name applies again)", status: 204}},
		op(http.MethodGet, "/known-hosts", (*Server).listKnownHosts, opDoc{summary: "The SSH host keys you trusted, one per remote host:port; a push to it refuses any other key", status: 200}),
		{http.MethodDelete, "/known-hosts/:host", (*Server).deleteKnownHost, opDoc{summary: "Forget a host's pinned key (the next push shows the key it presents, to trust again)", status: 204}},
	}
}

// SetSecretRequest is the body of PUT /secrets/{name} and
// /sessions/{id}/secrets/{name}.
type SetSecretRequest struct {
	Value *string `json:"value" jsonschema:"writeOnly" jsonschema_description:"the secret (an SSH key: its PEM or OpenSSH text); write-only: never answered"`
	Kind  string  `json:"kind,omitempty" jsonschema:"enum=vendor,enum=git_https,enum=git_ssh,enum=github_token,enum=gitlab_token" jsonschema_description:"default: vendor for a vendor key's name; else required"`
	// Host is the host the credential is for (e.g. github.com): a push or
	// a pull request to it picks the credential by it.
	Host string `json:"host,omitempty" jsonschema_description:"the host the credential is for, e.g. github.com (a push or pull request there picks it)"`
	// Username is an HTTPS credential's user name.
	Username string `json:"username,omitempty" jsonschema_description:"git_https: the user name (default for a token: x-access-token)"`
}

func (s *Server) setSecret(c echo.Context, sessionID string) (secrets.Info, error) {
	var req SetSecretRequest
	if err := decodeJSON(c, &req); err != nil {
		return secrets.Info{}, err
	}
	if req.Value == nil {
		return secrets.Info{}, orchestrator.FieldErrorf("value", "field \"value\" is required")
	}
	return s.secrets.Set(c.Request().Context(), user(c).ID, sessionID, c.Param("name"),
		secrets.NewSecret{Kind: req.Kind, Value: *req.Value, Host: req.Host, Username: req.Username})
}

func (s *Server) putUserSecret(c echo.Context) (secrets.Info, error) { return s.setSecret(c, "") }
func (s *Server) putSecret(c echo.Context) (secrets.Info, error) {
	return s.setSecret(c, c.Param("id"))
}

func (s *Server) listUserSecrets(c echo.Context) (listBody[secrets.Info], error) {
	infos, err := s.secrets.List(c.Request().Context(), user(c).ID, "")
	return list(infos), err
}

func (s *Server) listSecrets(c echo.Context) (listBody[secrets.Info], error) {
	infos, err := s.secrets.List(c.Request().Context(), user(c).ID, c.Param("id"))
	return list(infos), err
}

func (s *Server) deleteUserSecret(c echo.Context) error {
	if err := s.secrets.Delete(c.Request().Context(), user(c).ID, "", c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteSecret(c echo.Context) error {
	if err := s.secrets.Delete(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) listKnownHosts(c echo.Context) (listBody[secrets.KnownHost], error) {
	hosts, err := s.secrets.KnownHosts(c.Request().Context(), user(c).ID)
	return list(hosts), err
}

func (s *Server) deleteKnownHost(c echo.Context) error {
	if err := s.secrets.DeleteKnownHost(c.Request().Context(), user(c).ID, c.Param("host")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// needVendorKey refuses a node of an agent whose vendor key neither the
// session nor its user holds, naming the key and how to give it.
func (s *Server) needVendorKey(c echo.Context, sessionID, agentType string) error {
	agent, ok := orchestrator.AgentByType(agentType)
	if !ok || agent.VendorKey == "" {
		return nil
	}
	has, err := s.secrets.Has(c.Request().Context(), user(c).ID, sessionID, agent.VendorKey)
	if err != nil || has {
		return err
	}
	return orchestrator.FieldErrorf("agent_type", "the %s agent runs on %s's own service and needs %s: add it in Settings, or on the session (PUT /api/v1/sessions/%s/secrets/%s with {\"value\": ...}, or in the spawn dialog)",
		agent.Type, agent.Name, agent.VendorKey, sessionID, agent.VendorKey)
}
