package sessions_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// nodeRecords returns the "updated" node records published for nodeID.
func nodeRecords(t *testing.T, e *storetest.Env, nodeID string) []protocol.NodeChange {
	t.Helper()
	var out []protocol.NodeChange
	for _, r := range e.Pub.All() {
		if r.Kind != protocol.KindNode || r.NodeID != nodeID {
			continue
		}
		var c protocol.NodeChange
		if err := json.Unmarshal(r.Data, &c); err != nil {
			t.Fatal(err)
		}
		if c.Op == protocol.OpUpdated {
			out = append(out, c)
		}
	}
	return out
}

// TestRecordUsage: a batch of metered requests lands in llm_usage with every
// field, adds to the nodes' and the session's totals, and publishes one
// "updated" node record per node whose totals changed, with the new totals.
func TestRecordUsage(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	kid := e.Node(t, u.ID, s.ID, &root, "kid")
	ttfb := 12 * time.Millisecond
	batch := []sessions.Usage{
		{UserID: u.ID, SessionID: s.ID, NodeID: root.ID, Provider: "openrouter", Endpoint: "chat/completions", Model: "m1",
			InputTokens: 100, OutputTokens: 20, CacheReadTokens: 30, CostUSD: storetest.Ptr(0.25), Status: 200, Streamed: true,
			TTFB: &ttfb, Latency: 1500 * time.Millisecond},
		{UserID: u.ID, SessionID: s.ID, NodeID: root.ID, Provider: "anthropic", Endpoint: "v1/messages", Model: "m2",
			InputTokens: 5, OutputTokens: 7, CacheWriteTokens: 11, Status: 200, Latency: time.Second},
		{UserID: u.ID, SessionID: s.ID, NodeID: kid.ID, Provider: "openai", Endpoint: "responses", Model: "m3",
			InputTokens: 1, OutputTokens: 2, CostUSD: storetest.Ptr(0.5), Status: 499, Streamed: true, Latency: time.Millisecond, Note: "client closed"},
		{UserID: u.ID, SessionID: s.ID, NodeID: kid.ID, Provider: "openai", Endpoint: "models", Status: 200},
	}
	if err := e.Sessions.RecordUsage(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	rows, err := e.Sessions.SessionUsage(ctx, s.ID, 0, 0)
	if err != nil || len(rows) != 4 {
		t.Fatalf("usage rows = %+v, %v", rows, err)
	}
	r0 := rows[0]
	if r0.Provider != "openrouter" || r0.Endpoint != "chat/completions" || r0.Model != "m1" || r0.InputTokens != 100 ||
		r0.OutputTokens != 20 || r0.CacheReadTokens != 30 || r0.CostUSD == nil || *r0.CostUSD != 0.25 || r0.Status != 200 ||
		!r0.Streamed || r0.TTFB == nil || *r0.TTFB != ttfb || r0.Latency != 1500*time.Millisecond || !r0.At.Equal(e.Clock.Now()) {
		t.Fatalf("row 0 = %+v", r0)
	}
	if rows[1].CostUSD != nil || rows[1].CacheWriteTokens != 11 || rows[1].TTFB != nil {
		t.Fatalf("row 1 = %+v", rows[1])
	}
	if rows[2].Status != 499 || rows[2].Note != "client closed" {
		t.Fatalf("row 2 = %+v", rows[2])
	}

	gotRoot, _ := e.Sessions.GetNode(ctx, u.ID, s.ID, root.ID)
	gotKid, _ := e.Sessions.GetNode(ctx, u.ID, s.ID, kid.ID)
	if gotRoot.Tokens != 173 || gotRoot.CostUSD != 0.25 || gotKid.Tokens != 3 || gotKid.CostUSD != 0.5 {
		t.Fatalf("root tokens %d cost %v, kid tokens %d cost %v", gotRoot.Tokens, gotRoot.CostUSD, gotKid.Tokens, gotKid.CostUSD)
	}
	sess, _ := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.TokensUsed != 176 || sess.CostUSD != 0.75 {
		t.Fatalf("session used %d tokens, %v USD", sess.TokensUsed, sess.CostUSD)
	}
	for _, n := range []sessions.Node{gotRoot, gotKid} {
		recs := nodeRecords(t, e, n.ID)
		if len(recs) != 1 || recs[0].Node.Tokens != n.Tokens || recs[0].Node.CostUSD != n.CostUSD {
			t.Fatalf("node %s records = %+v, want one with tokens %d", n.Name, recs, n.Tokens)
		}
	}

	// A request that spent nothing changes no node: no record.
	before := len(e.Pub.All())
	if err := e.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: root.ID, Provider: "openai", Endpoint: "models", Status: 401}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Pub.All()); n != before {
		t.Fatalf("a zero-usage row published %d records", n-before)
	}
	if rows, _ := e.Sessions.SessionUsage(ctx, s.ID, rows[3].ID, 0); len(rows) != 1 || rows[0].Status != 401 {
		t.Fatalf("rows after %d = %+v", rows[3].ID, rows)
	}
}

// TestRecordUsageOutlivesDeletion: the spend of a deleted node stays in the
// session's total and its rows; the rows of a deleted session stay too.
func TestRecordUsageOutlivesDeletion(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	kid := e.Node(t, u.ID, s.ID, &root, "kid")
	if err := e.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: kid.ID, Provider: "openai", Endpoint: "responses", InputTokens: 10, Status: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, kid.ID); err != nil {
		t.Fatal(err)
	}
	// Metered after the deletion (the request was in flight).
	if err := e.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: kid.ID, Provider: "openai", Endpoint: "responses", OutputTokens: 5, Status: 200}); err != nil {
		t.Fatal(err)
	}
	sess, _ := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.TokensUsed != 15 {
		t.Fatalf("session tokens_used = %d, want 15 (a deleted node's spend stays)", sess.TokensUsed)
	}
	if err := e.Sessions.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: root.ID, Provider: "openai", Endpoint: "responses", OutputTokens: 1, Status: 200}); err != nil {
		t.Fatalf("usage of a deleted session: %v", err)
	}
	rows, err := e.Sessions.SessionUsage(ctx, s.ID, 0, 0)
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows of the deleted session = %d, %v; want 3", len(rows), err)
	}
}

func TestRecordUsageRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := e.Node(t, u.ID, s.ID, nil, "root")
	ok := sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: n.ID, Provider: "openai", Endpoint: "responses", Status: 200}
	for name, mut := range map[string]func(*sessions.Usage){
		"negative tokens": func(u *sessions.Usage) { u.OutputTokens = -1 },
		"NaN cost":        func(u *sessions.Usage) { u.CostUSD = storetest.Ptr(math.NaN()) },
		"negative cost":   func(u *sessions.Usage) { u.CostUSD = storetest.Ptr(-0.1) },
		"no node":         func(u *sessions.Usage) { u.NodeID = "" },
	} {
		bad := ok
		mut(&bad)
		// The good row of the same batch is not stored either.
		if err := e.Sessions.RecordUsage(ctx, ok, bad); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
			t.Errorf("%s: err %v, want invalid", name, err)
		}
	}
	if rows, _ := e.Sessions.SessionUsage(ctx, s.ID, 0, 0); len(rows) != 0 {
		t.Fatalf("stored %d rows of refused batches", len(rows))
	}
}

// TestSessionBudget: a new session takes the configured default budget; its
// owner changes or clears each limit; SessionSpend reports budget and spend.
func TestSessionBudget(t *testing.T) {
	ctx := context.Background()
	e := storetest.New(t)
	st := storetest.NewWith(t, storetest.Options{Sessions: sessions.Config{DefaultBudget: sessions.Budget{Tokens: storetest.Ptr(int64(1000))}}})
	u, _ := st.Users.CreateUser(ctx, "alice", false)
	s, err := st.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "s"})
	if err != nil || s.BudgetTokens == nil || *s.BudgetTokens != 1000 || s.BudgetUSD != nil {
		t.Fatalf("new session budget = %v / %v, %v", s.BudgetTokens, s.BudgetUSD, err)
	}
	n, _ := st.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "shelley"})
	if err := st.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: n.ID, Provider: "openrouter", Endpoint: "chat/completions",
		InputTokens: 999, CostUSD: storetest.Ptr(1.5), Status: 200}); err != nil {
		t.Fatal(err)
	}
	sp, err := st.Sessions.SessionSpend(ctx, s.ID)
	if err != nil || sp.TokensUsed != 999 || sp.CostUSD != 1.5 {
		t.Fatalf("spend = %+v, %v", sp, err)
	}
	if what, over := sp.Over(); over {
		t.Fatalf("999 of 1000 tokens is over (%s)", what)
	}
	if err := st.Sessions.RecordUsage(ctx, sessions.Usage{UserID: u.ID, SessionID: s.ID, NodeID: n.ID, Provider: "openrouter", Endpoint: "chat/completions", OutputTokens: 1, Status: 200}); err != nil {
		t.Fatal(err)
	}
	sp, _ = st.Sessions.SessionSpend(ctx, s.ID)
	if what, over := sp.Over(); !over || what != "tokens" {
		t.Fatalf("1000 of 1000 tokens: over=%v (%s)", over, what)
	}

	// Raise tokens, add a USD limit: over on dollars now.
	s, err = st.Sessions.SetSessionBudget(ctx, u.ID, s.ID, sessions.BudgetPatch{SetTokens: true, Tokens: storetest.Ptr(int64(5000)), SetUSD: true, USD: storetest.Ptr(1.5)})
	if err != nil || *s.BudgetTokens != 5000 || *s.BudgetUSD != 1.5 || s.TokensUsed != 1000 || s.CostUSD != 1.5 {
		t.Fatalf("after set: %+v, %v", s, err)
	}
	sp, _ = st.Sessions.SessionSpend(ctx, s.ID)
	if what, over := sp.Over(); !over || what != "usd" {
		t.Fatalf("$1.5 of $1.5: over=%v (%s)", over, what)
	}
	// Clearing USD leaves tokens as they are.
	s, err = st.Sessions.SetSessionBudget(ctx, u.ID, s.ID, sessions.BudgetPatch{SetUSD: true})
	if err != nil || s.BudgetUSD != nil || s.BudgetTokens == nil || *s.BudgetTokens != 5000 {
		t.Fatalf("after clearing usd: %+v, %v", s, err)
	}
	if _, err := st.Sessions.SetSessionBudget(ctx, u.ID, s.ID, sessions.BudgetPatch{SetTokens: true, Tokens: storetest.Ptr(int64(-1))}); orchestrator.ErrorField(err) != "budget_tokens" {
		t.Fatalf("negative budget: %v", err)
	}
	if _, err := st.Sessions.SetSessionBudget(ctx, u.ID, s.ID, sessions.BudgetPatch{SetUSD: true, USD: storetest.Ptr(math.Inf(1))}); orchestrator.ErrorField(err) != "budget_usd" {
		t.Fatalf("infinite budget: %v", err)
	}
	bob, _ := st.Users.CreateUser(ctx, "bob", false)
	if _, err := st.Sessions.SetSessionBudget(ctx, bob.ID, s.ID, sessions.BudgetPatch{SetTokens: true}); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another user's session: %v", err)
	}
	if _, err := st.Sessions.SessionSpend(ctx, "nope"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("unknown session: %v", err)
	}

	// The default store has no default budget.
	du := e.User(t, "carol")
	ds := e.Session(t, du.ID, "d")
	if ds.BudgetTokens != nil || ds.BudgetUSD != nil {
		t.Fatalf("no default: budget %v / %v", ds.BudgetTokens, ds.BudgetUSD)
	}
}
