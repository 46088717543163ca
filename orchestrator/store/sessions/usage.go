package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// Usage is one LLM request an agent sent through the gateway
// (orchestrator/gateway), as metered there: the billing source of truth.
type Usage struct {
	ID        int64 // assigned by the store
	UserID    string
	SessionID string
	NodeID    string
	Provider  string // openrouter, anthropic, openai
	Endpoint  string // the upstream path below the provider's base, e.g. "chat/completions"
	Model     string
	// Token counts; see migrations/0003_gateway.sql for what each holds.
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          *float64 // nil: the upstream reported no cost
	Status           int      // HTTP status; 499: the agent went away before the end
	Streamed         bool
	TTFB             *time.Duration // until the upstream's first body byte (nil: none came)
	Latency          time.Duration  // until the last byte
	Note             string         // what was odd: "client closed", "usage not reported", ...
	At               time.Time      // zero: the store's clock at commit
}

// Tokens is what the request adds to its node's and session's tokens: every
// prompt token (cached or not) and every completion token.
func (u Usage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

func (u Usage) cost() float64 {
	if u.CostUSD == nil {
		return 0
	}
	return *u.CostUSD
}

func (u Usage) check() error {
	switch {
	case u.UserID == "" || u.SessionID == "" || u.NodeID == "":
		return orchestrator.FieldErrorf("usage", "usage needs a user, a session and a node")
	case u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0:
		return orchestrator.FieldErrorf("usage", "token counts must not be negative")
	case u.CostUSD != nil && (*u.CostUSD < 0 || math.IsNaN(*u.CostUSD) || math.IsInf(*u.CostUSD, 0)):
		return orchestrator.FieldErrorf("usage", "cost must be a finite number, not negative")
	}
	return nil
}

// Budget bounds a session's LLM spend; a nil field is unlimited.
type Budget struct {
	Tokens *int64   `json:"budget_tokens"`
	USD    *float64 `json:"budget_usd"`
}

// Spend is a session's budget and what its agents spent so far.
type Spend struct {
	Budget
	TokensUsed int64
	CostUSD    float64
}

// Over reports whether the spend reached a limit of the budget, and which
// ("tokens" or "usd").
func (s Spend) Over() (string, bool) {
	if s.Tokens != nil && s.TokensUsed >= *s.Tokens {
		return "tokens", true
	}
	if s.USD != nil && s.CostUSD >= *s.USD {
		return "usd", true
	}
	return "", false
}

// BudgetPatch changes a session's budget: a field with its Set flag changes
// (to nil: unlimited); the others stay.
type BudgetPatch struct {
	SetTokens bool
	Tokens    *int64
	SetUSD    bool
	USD       *float64
}

// Validate checks the limits of b.
func (b Budget) Validate() error {
	if b.Tokens != nil && *b.Tokens < 0 {
		return orchestrator.FieldErrorf("budget_tokens", "budget_tokens must not be negative (null: unlimited)")
	}
	if b.USD != nil && (*b.USD < 0 || math.IsNaN(*b.USD) || math.IsInf(*b.USD, 0)) {
		return orchestrator.FieldErrorf("budget_usd", "budget_usd must be a number of dollars, not negative (null: unlimited)")
	}
	return nil
}

// SetSessionBudget changes the budget of userID's session and returns the
// session.
func (s *Store) SetSessionBudget(ctx context.Context, userID, sessionID string, p BudgetPatch) (protocol.Session, error) {
	return s.PatchSession(ctx, userID, sessionID, SessionPatch{Budget: p})
}

// SessionSpend returns a session's budget and spend, whoever owns it (for
// the gateway, which checks it before every request).
func (s *Store) SessionSpend(ctx context.Context, sessionID string) (Spend, error) {
	spend, err := s.st.ReadStmt(ctx, spendSQL)
	if err != nil {
		return Spend{}, fmt.Errorf("prepare spend query: %w", err)
	}
	var sp Spend
	err = spend.QueryRowContext(ctx, sessionID).Scan(&sp.Tokens, &sp.USD, &sp.TokensUsed, &sp.CostUSD)
	if errors.Is(err, sql.ErrNoRows) {
		return Spend{}, store.NotFound("session", sessionID)
	}
	if err != nil {
		return Spend{}, fmt.Errorf("read session %s budget: %w", sessionID, err)
	}
	return sp, nil
}

const spendSQL = `SELECT budget_tokens, budget_usd, tokens_used, cost_usd FROM agent_session WHERE id = ?`

const insertUsageSQL = `INSERT INTO llm_usage (user_id, session_id, node_id, provider, endpoint, model,
	input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, status, streamed,
	ttfb_ms, latency_ms, note, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// insertUsage inserts one row, through ins (insertUsageSQL prepared on the
// write connection) when g is a transaction on it.
func insertUsage(ctx context.Context, g *gorm.DB, ins *sql.Stmt, now time.Time, u Usage) error {
	at := u.At
	if at.IsZero() {
		at = now
	}
	var ttfb *int64
	if u.TTFB != nil {
		v := u.TTFB.Milliseconds()
		ttfb = &v
	}
	args := []any{u.UserID, u.SessionID, u.NodeID, u.Provider, u.Endpoint, u.Model,
		u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD, u.Status, u.Streamed,
		ttfb, u.Latency.Milliseconds(), u.Note, store.Millis(at)}
	var err error
	if tx, ok := g.Statement.ConnPool.(*sql.Tx); ok {
		_, err = tx.StmtContext(ctx, ins).ExecContext(ctx, args...)
	} else {
		err = g.Exec(insertUsageSQL, args...).Error
	}
	if err != nil {
		return fmt.Errorf("insert usage of node %s: %w", u.NodeID, err)
	}
	return nil
}

// RecordUsage stores metered requests. Per session, in one transaction, it
// inserts their rows and adds their tokens and cost to the session's totals
// and, through the node-update path, to each node's (one "updated" record
// per node whose totals changed, published after the commit so the UI sees
// it live). Rows of a deleted node or session are kept: billing outlives
// them.
func (s *Store) RecordUsage(ctx context.Context, us ...Usage) error {
	for _, u := range us {
		if err := u.check(); err != nil {
			return err
		}
	}
	// Prepared before the transactions: inside one the write connection is busy.
	ins, err := s.st.WriteStmt(ctx, insertUsageSQL)
	if err != nil {
		return fmt.Errorf("prepare usage insert: %w", err)
	}
	var order []string
	bySession := map[string][]Usage{}
	for _, u := range us {
		if _, ok := bySession[u.SessionID]; !ok {
			order = append(order, u.SessionID)
		}
		bySession[u.SessionID] = append(bySession[u.SessionID], u)
	}
	var errs []error
	for _, sid := range order {
		if err := s.recordSessionUsage(ctx, ins, sid, bySession[sid]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) recordSessionUsage(ctx context.Context, ins *sql.Stmt, sessionID string, us []Usage) error {
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		var tokens int64
		var cost float64
		var nodes []string
		add := map[string]*NodePatch{}
		for _, u := range us {
			if err := insertUsage(ctx, g, ins, tx.Now(), u); err != nil {
				return err
			}
			tokens += u.Tokens()
			cost += u.cost()
			if u.Tokens() == 0 && u.cost() == 0 {
				continue
			}
			p := add[u.NodeID]
			if p == nil {
				p = &NodePatch{}
				add[u.NodeID] = p
				nodes = append(nodes, u.NodeID)
			}
			p.AddTokens += u.Tokens()
			p.AddCostUSD += u.cost()
		}
		if len(nodes) == 0 {
			return nil
		}
		if err := g.Exec(`UPDATE agent_session SET tokens_used = tokens_used + ?, cost_usd = cost_usd + ? WHERE id = ?`,
			tokens, cost, sessionID).Error; err != nil {
			return fmt.Errorf("add usage to session %s: %w", sessionID, err)
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		for _, id := range nodes {
			if t.byID[id] == nil {
				continue // deleted meanwhile: the row and the session total keep its spend
			}
			if _, err := patchNode(tx, t, id, *add[id]); err != nil {
				return err
			}
		}
		return nil
	})
	if orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		return err
	}
	// The session is gone: keep the rows.
	return s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		for _, u := range us {
			if err := insertUsage(ctx, g, ins, s.now(), u); err != nil {
				return err
			}
		}
		return nil
	})
}

// SessionUsage returns up to limit metered requests of a session with id >
// after, oldest first (limit <= 0: 1000).
func (s *Store) SessionUsage(ctx context.Context, sessionID string, after int64, limit int) ([]Usage, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.rsql.QueryContext(ctx, `SELECT id, user_id, session_id, node_id, provider, endpoint, model,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, status, streamed,
		ttfb_ms, latency_ms, note, created_at FROM llm_usage WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?`,
		sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read session %s usage: %w", sessionID, err)
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		var ttfb *int64
		var latency, at int64
		if err := rows.Scan(&u.ID, &u.UserID, &u.SessionID, &u.NodeID, &u.Provider, &u.Endpoint, &u.Model,
			&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CostUSD, &u.Status,
			&u.Streamed, &ttfb, &latency, &u.Note, &at); err != nil {
			return nil, fmt.Errorf("read session %s usage: %w", sessionID, err)
		}
		if ttfb != nil {
			d := time.Duration(*ttfb) * time.Millisecond
			u.TTFB = &d
		}
		u.Latency = time.Duration(latency) * time.Millisecond
		u.At = store.FromMillis(at)
		out = append(out, u)
	}
	return out, rows.Err()
}
