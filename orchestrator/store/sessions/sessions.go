package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// Limits on session fields.
const (
	MaxSessionNameLen = 200  // runes
	MaxGitURLLen      = 2048 // bytes
	MaxChecks         = 16   // health checks of one session
	MaxCheckLen       = 4096 // bytes of one check's command
	// DefaultMaxCheckTimeout is the default of Config.MaxCheckTimeout.
	DefaultMaxCheckTimeout = 30 * time.Minute
)

// sessionRow is agent_session as stored, plus the computed columns of
// sessionSelect. sessionSelect leaves out the hidden rows that key workspace
// forks (fs_fork, migration 0012): they are not sessions.
type sessionRow struct {
	ID         string
	UserID     string
	Name       string
	GitRepoURL *string
	Status     string
	RootNodeID *string
	StartedAt  *int64
	CreatedAt  int64
	UpdatedAt  int64
	NodeCount  int
	LastLogAt  *int64
	Checks     string

	BudgetTokens *int64
	BudgetUSD    *float64
	TokensUsed   int64
	CostUSD      float64
}

const sessionSelect = `SELECT s.id, s.user_id, s.name, s.git_repo_url, s.status, s.root_node_id,
	s.started_at, s.created_at, s.updated_at, s.checks, s.budget_tokens, s.budget_usd, s.tokens_used, s.cost_usd,
	(SELECT COUNT(*) FROM agent_node n WHERE n.session_id = s.id) AS node_count,
	(SELECT l.created_at FROM session_log l WHERE l.session_id = s.id ORDER BY l.seq DESC LIMIT 1) AS last_log_at
	FROM agent_session s
	WHERE NOT EXISTS (SELECT 1 FROM fs_fork f WHERE f.ws = s.id)`

func (r sessionRow) session() protocol.Session {
	s := protocol.Session{
		ID: r.ID, UserID: r.UserID, Name: r.Name, GitRepoURL: r.GitRepoURL, Status: r.Status,
		RootNodeID: r.RootNodeID, StartedAt: store.FromMillisPtr(r.StartedAt),
		CreatedAt: store.FromMillis(r.CreatedAt), UpdatedAt: store.FromMillis(r.UpdatedAt), NodeCount: r.NodeCount,
		BudgetTokens: r.BudgetTokens, BudgetUSD: r.BudgetUSD, TokensUsed: r.TokensUsed, CostUSD: r.CostUSD,
		Checks: []protocol.Check{},
	}
	if r.Checks != "" {
		// Written by this package from validated checks; a row that does not
		// decode shows none rather than failing every read of the session.
		_ = json.Unmarshal([]byte(r.Checks), &s.Checks)
	}
	s.LastActivity = s.UpdatedAt
	if r.LastLogAt != nil && *r.LastLogAt > r.UpdatedAt {
		s.LastActivity = store.FromMillis(*r.LastLogAt)
	}
	return s
}

// getSession reads one session; userID "" skips the owner check (internal
// callers). Another user's session is not_found.
func getSession(g *gorm.DB, userID, id string) (protocol.Session, error) {
	q := sessionSelect + ` AND s.id = ?`
	args := []any{id}
	if userID != "" {
		q += ` AND s.user_id = ?`
		args = append(args, userID)
	}
	var rows []sessionRow
	if err := g.Raw(q, args...).Scan(&rows).Error; err != nil {
		return protocol.Session{}, fmt.Errorf("read session %s: %w", id, err)
	}
	if len(rows) == 0 {
		return protocol.Session{}, store.NotFound("session", id)
	}
	return rows[0].session(), nil
}

func validateSessionName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", orchestrator.FieldErrorf("name", "name is required")
	case utf8.RuneCountInString(name) > MaxSessionNameLen:
		return "", orchestrator.FieldErrorf("name", "name is longer than %d characters", MaxSessionNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", orchestrator.FieldErrorf("name", "name must not contain control characters")
	}
	return name, nil
}

// ValidateGitURL returns the git URL a session would store, or the error
// CreateSession would return for it.
func ValidateGitURL(raw string) (string, error) { return validateGitURL(raw) }

// validateGitURL accepts https, http, ssh and git URLs and scp-like
// user@host:path. It refuses local paths and file:// (they would read the
// orchestrator's disk) and anything git could take for an option.
func validateGitURL(raw string) (string, error) {
	u := strings.TrimSpace(raw)
	bad := func(format string, args ...any) (string, error) {
		return "", orchestrator.FieldErrorf("git_repo_url", format, args...)
	}
	switch {
	case u == "":
		return bad("git_repo_url is empty; omit it for a session without a repository")
	case len(u) > MaxGitURLLen:
		return bad("git_repo_url is longer than %d bytes", MaxGitURLLen)
	case strings.HasPrefix(u, "-"):
		return bad("git_repo_url must not start with '-'")
	case strings.IndexFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return bad("git_repo_url must not contain spaces or control characters")
	}
	if scheme, _, ok := strings.Cut(u, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "http", "ssh", "git":
		default:
			return bad("git_repo_url scheme %q is not allowed; use https, http, ssh or git", scheme)
		}
		p, err := url.Parse(u)
		if err != nil || p.Hostname() == "" {
			return bad("git_repo_url %q is not a valid URL with a host", u)
		}
		if strings.HasPrefix(p.Hostname(), "-") {
			return bad("git_repo_url host must not start with '-'")
		}
		return u, nil
	}
	// scp-like syntax: [user@]host:path, where host has no slash. Refuse
	// git's "transport::address" remote-helper syntax (ext::, fd::, ...).
	if strings.Contains(u, "::") {
		return bad("git_repo_url %q uses a git remote helper (transport::address); use https://, ssh:// or user@host:path", u)
	}
	host, path, ok := strings.Cut(u, ":")
	if !ok || host == "" || path == "" || strings.Contains(host, "/") {
		return bad("git_repo_url %q is neither a URL (https://, ssh://, git://) nor user@host:path", u)
	}
	if _, h, found := strings.Cut(host, "@"); (found && h == "") || strings.HasPrefix(h, "-") || strings.HasPrefix(host, "-") {
		return bad("git_repo_url host must not be empty or start with '-'")
	}
	return u, nil
}

// validateChecks trims the commands and returns the checks as stored (a
// JSON array).
func (s *Store) validateChecks(checks []protocol.Check) (string, error) {
	if len(checks) > MaxChecks {
		return "", orchestrator.FieldErrorf("checks", "a session has at most %d checks, got %d", MaxChecks, len(checks))
	}
	out := make([]protocol.Check, 0, len(checks))
	maxSec := int(s.cfg.MaxCheckTimeout / time.Second)
	for i, c := range checks {
		c.Command = strings.TrimSpace(c.Command)
		switch {
		case c.Command == "":
			return "", orchestrator.FieldErrorf("checks", "check %d has an empty command", i+1)
		case len(c.Command) > MaxCheckLen:
			return "", orchestrator.FieldErrorf("checks", "check %d is longer than %d bytes", i+1, MaxCheckLen)
		case strings.IndexFunc(c.Command, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0:
			return "", orchestrator.FieldErrorf("checks", "check %d must be one line without control characters (join commands with && or ;)", i+1)
		case c.Timeout < 0:
			return "", orchestrator.FieldErrorf("checks", "check %d: timeout must be a positive number of seconds", i+1)
		case c.Timeout > maxSec:
			return "", orchestrator.FieldErrorf("checks", "check %d: timeout %ds is over this server's maximum of %ds (--check-timeout-max)", i+1, c.Timeout, maxSec)
		}
		out = append(out, c)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode checks: %w", err)
	}
	return string(b), nil
}

// CreateSession creates a draft session owned by userID.
func (s *Store) CreateSession(ctx context.Context, userID string, in NewSession) (protocol.Session, error) {
	name, err := validateSessionName(in.Name)
	if err != nil {
		return protocol.Session{}, err
	}
	checks, err := s.validateChecks(in.Checks)
	if err != nil {
		return protocol.Session{}, err
	}
	var gitURL *string
	if in.GitRepoURL != nil && strings.TrimSpace(*in.GitRepoURL) != "" {
		u, err := validateGitURL(*in.GitRepoURL)
		if err != nil {
			return protocol.Session{}, err
		}
		gitURL = &u
	}
	now := store.Millis(s.now())
	id := store.NewID()
	err = s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		var n int64
		if err := g.Raw(`SELECT COUNT(*) FROM users WHERE id = ?`, userID).Scan(&n).Error; err != nil {
			return fmt.Errorf("read user: %w", err)
		}
		if n == 0 {
			return store.NotFound("user", userID)
		}
		b := s.cfg.DefaultBudget
		return g.Exec(`INSERT INTO agent_session (id, user_id, name, git_repo_url, status, created_at, updated_at, checks,
			budget_tokens, budget_usd) VALUES (?, ?, ?, ?, 'draft', ?, ?, ?, ?, ?)`, id, userID, name, gitURL, now, now, checks,
			b.Tokens, b.USD).Error
	})
	if err != nil {
		return protocol.Session{}, fmt.Errorf("create session: %w", err)
	}
	return getSession(s.rdb.WithContext(ctx), userID, id)
}

// GetSession returns userID's session id (another user's → not_found).
func (s *Store) GetSession(ctx context.Context, userID, id string) (protocol.Session, error) {
	return getSession(s.rdb.WithContext(ctx), store.RequireUser(userID), id)
}

// SessionByID returns a session whoever owns it. For the runner and relays,
// which act for the session's owner; never for request handlers.
func (s *Store) SessionByID(ctx context.Context, id string) (protocol.Session, error) {
	return getSession(s.rdb.WithContext(ctx), "", id)
}

// SessionPatch lists what PatchSession changes of a session.
type SessionPatch struct {
	SetChecks bool             // replace the health checks with Checks (empty: detect them)
	Checks    []protocol.Check //
	Budget    BudgetPatch
}

// PatchSession changes userID's session: its health checks (they apply from
// the next agent session on) and its LLM budget. Everything is validated
// before anything is written, and written in one statement.
func (s *Store) PatchSession(ctx context.Context, userID, id string, p SessionPatch) (protocol.Session, error) {
	q, args := `UPDATE agent_session SET updated_at = ?`, []any{store.Millis(s.now())}
	if p.SetChecks {
		enc, err := s.validateChecks(p.Checks)
		if err != nil {
			return protocol.Session{}, err
		}
		q += `, checks = ?`
		args = append(args, enc)
	}
	b := p.Budget
	if err := (Budget{Tokens: b.Tokens, USD: b.USD}).Validate(); err != nil {
		return protocol.Session{}, err
	}
	if b.SetTokens {
		q += `, budget_tokens = ?`
		args = append(args, b.Tokens)
	}
	if b.SetUSD {
		q += `, budget_usd = ?`
		args = append(args, b.USD)
	}
	if !p.SetChecks && !b.SetTokens && !b.SetUSD {
		return s.GetSession(ctx, userID, id)
	}
	res := s.db.WithContext(ctx).Exec(q+` WHERE id = ? AND user_id = ?`, append(args, id, store.RequireUser(userID))...)
	if res.Error != nil {
		return protocol.Session{}, fmt.Errorf("change session %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return protocol.Session{}, store.NotFound("session", id)
	}
	return getSession(s.rdb.WithContext(ctx), store.RequireUser(userID), id)
}

// SetSessionChecks replaces the health checks of userID's session (empty:
// detected from the repository). They apply from the next agent session on.
func (s *Store) SetSessionChecks(ctx context.Context, userID, id string, checks []protocol.Check) (protocol.Session, error) {
	return s.PatchSession(ctx, userID, id, SessionPatch{SetChecks: true, Checks: checks})
}

// ListSessions returns userID's sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, userID string) ([]protocol.Session, error) {
	var rows []sessionRow
	if err := s.rdb.WithContext(ctx).Raw(sessionSelect+` AND s.user_id = ? ORDER BY s.created_at DESC, s.id`,
		store.RequireUser(userID)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]protocol.Session, len(rows))
	for i, r := range rows {
		out[i] = r.session()
	}
	return out, nil
}

// SessionsByStatus returns every user's sessions with one of the statuses
// (for reconciling at start-up).
func (s *Store) SessionsByStatus(ctx context.Context, statuses ...string) ([]protocol.Session, error) {
	var rows []sessionRow
	if err := s.rdb.WithContext(ctx).Raw(sessionSelect+` AND s.status IN ? ORDER BY s.created_at, s.id`,
		statuses).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sessions by status: %w", err)
	}
	out := make([]protocol.Session, len(rows))
	for i, r := range rows {
		out[i] = r.session()
	}
	return out, nil
}

// DeleteSession deletes userID's session with its nodes, log and files (by
// foreign-key cascade). Stop its containers first.
func (s *Store) DeleteSession(ctx context.Context, userID, id string) error {
	return s.st.EndLog(id, func() error {
		res := s.db.WithContext(ctx).Exec(`DELETE FROM agent_session WHERE id = ? AND user_id = ?`, id, store.RequireUser(userID))
		if res.Error != nil {
			return fmt.Errorf("delete session %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return store.NotFound("session", id)
		}
		return nil
	})
}

// UpdateSessionStatus sets a session's status (any owner: for the runner).
// Becoming running sets started_at.
func (s *Store) UpdateSessionStatus(ctx context.Context, sessionID, status string) error {
	switch status {
	case protocol.SessionDraft, protocol.SessionRunning, protocol.SessionPaused, protocol.SessionStopped, protocol.SessionError:
	default:
		return orchestrator.FieldErrorf("status", "session status %q: want draft, running, paused, stopped or error", status)
	}
	now := store.Millis(s.now())
	q := `UPDATE agent_session SET status = ?, updated_at = ? WHERE id = ?`
	args := []any{status, now, sessionID}
	if status == protocol.SessionRunning {
		// A session already running keeps the time it started.
		q = `UPDATE agent_session SET started_at = CASE WHEN status = 'running' THEN started_at ELSE ? END, status = ?, updated_at = ? WHERE id = ?`
		args = []any{now, status, now, sessionID}
	}
	res := s.db.WithContext(ctx).Exec(q, args...)
	if res.Error != nil {
		return fmt.Errorf("update session %s status: %w", sessionID, res.Error)
	}
	if res.RowsAffected == 0 {
		return store.NotFound("session", sessionID)
	}
	return nil
}

// CheckOwner checks through g (a transaction's handle, or a pool) that
// session sessionID exists and belongs to userID: another user's is
// not_found, like a missing one.
func CheckOwner(g *gorm.DB, userID, sessionID string) error {
	_, err := ownedSession(g, store.RequireUser(userID), sessionID)
	return err
}
