package collab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Limits of an approval request.
const (
	MaxApprovalAction    = 2 << 10 // bytes of the action
	MaxApprovalDetail    = 8 << 10 // bytes of the detail
	MaxApprovalKind      = 64
	MaxApprovalRequestID = 128
	DefaultApprovalsList = 100
	MaxApprovalsList     = 1000
)

// Approval is an agent's request for permission and, once answered, its
// answer.
type Approval struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	NodeID    string `json:"node_id"`
	NodeName  string `json:"node_name"`
	// RequestID is the agent's own id of the request, if it gave one.
	RequestID string `json:"request_id,omitempty"`
	Action    string `json:"action"`
	Detail    string `json:"detail"`
	Kind      string `json:"kind"`
	// Scope is what "Always" allows: "" the kind; for a request the
	// server made, something narrower it names (the host of a "network"
	// request: "Always" allows that host for the node).
	Scope      string     `json:"scope,omitempty"`
	Status     string     `json:"status" jsonschema:"enum=pending,enum=approved,enum=denied"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	Always     bool       `json:"always,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	AnsweredAt *time.Time `json:"answered_at" jsonschema:"nullable"`
	// Payload is what the orchestrator does itself once the request is
	// approved (JSON; "" : the agent acts): never answered.
	Payload string `json:"-"`
}

// NewApproval is an agent's request.
type NewApproval struct {
	RequestID string
	Action    string
	Detail    string
	Kind      string
	// Scope narrows what the node's policy and an "Always" answer cover:
	// the policy key is kind:scope instead of kind (ScopedKind). Only the
	// server sets it (the egress proxy: kind network, scope the host).
	Scope string
	// Timeout is how long it waits for an answer before it is denied.
	Timeout time.Duration
	// Payload is Approval.Payload.
	Payload string
}

// Decision is a user's answer to a request.
type Decision struct {
	Approve bool
	// Always approves and allows the request's kind (or its scope,
	// ScopedKind) for its node from now on (the node's config gets
	// approvals[kind] = "allow").
	Always bool
	// Credential, approving a request the orchestrator carries out
	// itself (one with a Payload: a push, a pull request), names the
	// secret it uses: it is set as the payload's "credential", over the
	// one the agent named or the default.
	Credential string
}

// MaxCredentialName bounds Decision.Credential.
const MaxCredentialName = 200

type approvalRow struct {
	ID         string
	SessionID  string
	NodeID     string
	NodeName   string
	RequestID  string
	Action     string
	Detail     string
	Kind       string
	Scope      string
	Status     string
	AnsweredBy string
	Always     bool
	CreatedAt  int64
	ExpiresAt  int64
	AnsweredAt *int64
	Payload    string
}

const approvalSelect = `SELECT a.id, a.session_id, a.node_id, COALESCE(n.name, '') AS node_name, a.request_id, a.action,
	a.detail, a.kind, a.scope, a.status, a.answered_by, a.always, a.created_at, a.expires_at, a.answered_at, a.payload
	FROM approvals a LEFT JOIN agent_node n ON n.id = a.node_id`

func (r approvalRow) approval() Approval {
	return Approval{ID: r.ID, SessionID: r.SessionID, NodeID: r.NodeID, NodeName: r.NodeName, RequestID: r.RequestID,
		Action: r.Action, Detail: r.Detail, Kind: r.Kind, Scope: r.Scope, Status: r.Status, AnsweredBy: r.AnsweredBy, Always: r.Always,
		CreatedAt: store.FromMillis(r.CreatedAt), ExpiresAt: store.FromMillis(r.ExpiresAt), AnsweredAt: store.FromMillisPtr(r.AnsweredAt), Payload: r.Payload}
}

// Record is the approval as its system records carry it.
func (a Approval) Record() protocol.Approval {
	return protocol.Approval{ID: a.ID, Action: a.Action, Detail: a.Detail, Kind: a.Kind, Scope: a.Scope, Status: a.Status,
		AnsweredBy: a.AnsweredBy, AnsweredAt: a.AnsweredAt, Always: a.Always, ExpiresAt: a.ExpiresAt}
}

func validApproval(in *NewApproval) error {
	in.Action, in.Kind, in.RequestID = strings.TrimSpace(in.Action), strings.TrimSpace(in.Kind), strings.TrimSpace(in.RequestID)
	switch {
	case in.Action == "":
		return orchestrator.FieldErrorf("action", "action is required: what the agent wants to do, e.g. \"bash: git push origin main\"")
	case len(in.Action) > MaxApprovalAction:
		return orchestrator.FieldErrorf("action", "action is longer than %d bytes", MaxApprovalAction)
	case len(in.Detail) > MaxApprovalDetail:
		return orchestrator.FieldErrorf("detail", "detail is longer than %d bytes", MaxApprovalDetail)
	case len(in.Kind) > MaxApprovalKind || strings.IndexFunc(in.Kind, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return orchestrator.FieldErrorf("kind", "kind must be a word of at most %d bytes, e.g. \"bash\" or \"network\"", MaxApprovalKind)
	case len(in.RequestID) > MaxApprovalRequestID || strings.IndexFunc(in.RequestID, unicode.IsControl) >= 0:
		return orchestrator.FieldErrorf("request_id", "request_id must be at most %d bytes without control characters", MaxApprovalRequestID)
	case len(in.Scope) > MaxApprovalAction || strings.IndexFunc(in.Scope, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return orchestrator.FieldErrorf("scope", "scope must be a word of at most %d bytes", MaxApprovalAction)
	case in.Timeout <= 0:
		return orchestrator.FieldErrorf("timeout", "an approval needs a positive timeout")
	}
	return nil
}

// RequestApproval stores nodeID's request and appends its system record
// (pending) in one transaction. The node's policy for the kind answers it
// at once (allow: approved, deny: denied, answered by "policy"; one record).
// A request whose RequestID the node used before returns that request, and
// created is false: nothing is stored twice.
func (s *Store) RequestApproval(ctx context.Context, sessionID, nodeID string, in NewApproval) (a Approval, created bool, err error) {
	if err := validApproval(&in); err != nil {
		return Approval{}, false, err
	}
	_, err = s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		if in.RequestID != "" {
			var rows []approvalRow
			if err := g.Raw(approvalSelect+` WHERE a.node_id = ? AND a.request_id = ?`, nodeID, in.RequestID).Scan(&rows).Error; err != nil {
				return fmt.Errorf("read approval: %w", err)
			}
			if len(rows) > 0 {
				a = rows[0].approval()
				return nil
			}
		}
		node, err := sessions.NodeIn(g, sessionID, nodeID)
		if err != nil {
			return err
		}
		policies, err := sessions.ApprovalPolicies(node.Config)
		if err != nil {
			policies = map[string]string{} // a broken policy asks
		}
		now := tx.Now()
		a = Approval{ID: store.NewID(), SessionID: sessionID, NodeID: nodeID, NodeName: node.Name, RequestID: in.RequestID,
			Action: in.Action, Detail: in.Detail, Kind: in.Kind, Scope: in.Scope, Status: protocol.ApprovalPending, Payload: in.Payload,
			CreatedAt: store.FromMillis(store.Millis(now)), ExpiresAt: store.FromMillis(store.Millis(now.Add(in.Timeout)))}
		text := fmt.Sprintf("%s asks: %s", a.NodeName, cutText(a.Action, 200))
		key := ScopedKind(in.Kind, in.Scope)
		switch policies[key] {
		case sessions.PolicyAllow:
			a.Status, a.AnsweredBy, a.AnsweredAt = protocol.ApprovalApproved, protocol.AnsweredByPolicy, &a.CreatedAt
			text = fmt.Sprintf("%s: %s (approved by the node's %s policy)", a.NodeName, cutText(a.Action, 200), key)
		case sessions.PolicyDeny:
			a.Status, a.AnsweredBy, a.AnsweredAt = protocol.ApprovalDenied, protocol.AnsweredByPolicy, &a.CreatedAt
			text = fmt.Sprintf("%s: %s (denied by the node's %s policy)", a.NodeName, cutText(a.Action, 200), key)
		}
		var answered *int64
		if a.AnsweredAt != nil {
			v := store.Millis(*a.AnsweredAt)
			answered = &v
		}
		if err := g.Exec(`INSERT INTO approvals (id, session_id, node_id, request_id, action, detail, kind, scope, status, answered_by,
			created_at, expires_at, answered_at, payload) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			a.ID, sessionID, nodeID, a.RequestID, a.Action, a.Detail, a.Kind, a.Scope, a.Status, a.AnsweredBy,
			store.Millis(a.CreatedAt), store.Millis(a.ExpiresAt), answered, a.Payload).Error; err != nil {
			if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
				return store.NotFound("node", nodeID)
			}
			return fmt.Errorf("store approval: %w", err)
		}
		created = true
		rec := a.Record()
		return tx.AppendJSON(nodeID, protocol.KindSystem, protocol.SystemData{Type: protocol.SystemApproval, Text: text, Approval: &rec})
	})
	if err != nil {
		return Approval{}, false, err
	}
	return a, created, nil
}

// GetApproval returns one approval of a session (callers check who may see it).
func (s *Store) GetApproval(ctx context.Context, sessionID, id string) (Approval, error) {
	var rows []approvalRow
	if err := s.rdb.WithContext(ctx).Raw(approvalSelect+` WHERE a.id = ? AND a.session_id = ?`, id, sessionID).Scan(&rows).Error; err != nil {
		return Approval{}, fmt.Errorf("read approval: %w", err)
	}
	if len(rows) == 0 {
		return Approval{}, store.NotFound("approval", id)
	}
	return rows[0].approval(), nil
}

// Approvals lists the approvals of userID's session, oldest first: only
// those of status when it is not "" (pending, approved, denied).
func (s *Store) Approvals(ctx context.Context, userID, sessionID, status string, limit int) ([]Approval, error) {
	g := s.rdb.WithContext(ctx)
	if err := sessions.CheckOwner(g, userID, sessionID); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultApprovalsList
	}
	limit = min(limit, MaxApprovalsList)
	q := approvalSelect + ` WHERE a.session_id = ?`
	args := []any{sessionID}
	switch status {
	case "":
	case protocol.ApprovalPending, protocol.ApprovalApproved, protocol.ApprovalDenied:
		q += ` AND a.status = ?`
		args = append(args, status)
	default:
		return nil, orchestrator.FieldErrorf("status", "status %q: want pending, approved or denied", status)
	}
	// The newest `limit`, in the order they were asked.
	q = `SELECT * FROM (` + q + ` ORDER BY a.created_at DESC, a.id DESC LIMIT ?) AS newest ORDER BY created_at, id`
	var rows []approvalRow
	if err := g.Raw(q, append(args, limit)...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = r.approval()
	}
	return out, nil
}

// AnswerApproval answers a pending request of userID's session as by (the
// user's name) and appends the answer's system record in the same
// transaction; with Always also the node's config allows the kind from now
// on (and its "updated" node record). An answered request is a conflict
// naming the answer.
func (s *Store) AnswerApproval(ctx context.Context, userID, sessionID, id string, d Decision, by string) (Approval, error) {
	var out Approval
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		if err := sessions.CheckOwner(g, userID, sessionID); err != nil {
			return err
		}
		var err error
		out, err = answer(tx, sessionID, id, d, by)
		return err
	})
	return out, err
}

// WithdrawApproval ends a pending request of nodeID that its agent no
// longer asks (the CLI cancelled its prompt, the agent is stopping): it is
// denied, answered by "agent", with its record, so nobody approves a
// question that is gone. Another node's request is not found; an answered
// one is a conflict naming the answer.
func (s *Store) WithdrawApproval(ctx context.Context, sessionID, nodeID, id string) (Approval, error) {
	var out Approval
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		var owner []string
		if err := tx.DB().Raw(`SELECT node_id FROM approvals WHERE id = ? AND session_id = ?`, id, sessionID).Scan(&owner).Error; err != nil {
			return fmt.Errorf("read approval: %w", err)
		}
		if len(owner) == 0 || owner[0] != nodeID {
			return store.NotFound("approval", id)
		}
		var err error
		out, err = answer(tx, sessionID, id, Decision{}, protocol.AnsweredByAgent)
		return err
	})
	return out, err
}

// WithdrawNodeApprovals withdraws every pending request of nodeID (its
// container is gone: nobody is left to receive the answer) and returns how
// many it withdrew.
func (s *Store) WithdrawNodeApprovals(ctx context.Context, nodeID string) (int, error) {
	var pending []struct {
		ID        string
		SessionID string
	}
	if err := s.rdb.WithContext(ctx).Raw(`SELECT id, session_id FROM approvals WHERE node_id = ? AND status = 'pending' ORDER BY created_at`,
		nodeID).Scan(&pending).Error; err != nil {
		return 0, fmt.Errorf("read pending approvals: %w", err)
	}
	n := 0
	for _, a := range pending {
		if _, err := s.WithdrawApproval(ctx, a.SessionID, nodeID, a.ID); err != nil {
			switch orchestrator.ErrorCode(err) {
			case orchestrator.EConflict, orchestrator.ENotFound: // answered or deleted meanwhile
				continue
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// chooseCredential sets the credential the orchestrator uses for the
// request a, one it carries out itself, to name.
func chooseCredential(g *gorm.DB, a *Approval, name string) error {
	if a.Payload == "" {
		return orchestrator.FieldErrorf("credential", "approval %s is not a push or pull request: it has no credential to choose", a.ID)
	}
	if len(name) > MaxCredentialName || strings.TrimSpace(name) != name {
		return orchestrator.FieldErrorf("credential", "%q is not a secret's name", name)
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(a.Payload), &payload); err != nil {
		return fmt.Errorf("approval %s: read payload: %w", a.ID, err)
	}
	payload["credential"] = name
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	a.Payload = string(b)
	if err := g.Exec(`UPDATE approvals SET payload = ? WHERE id = ?`, a.Payload, a.ID).Error; err != nil {
		return fmt.Errorf("answer approval: %w", err)
	}
	return nil
}

// answer answers one pending approval inside tx.
func answer(tx *store.Tx, sessionID, id string, d Decision, by string) (Approval, error) {
	g := tx.DB()
	var rows []approvalRow
	if err := g.Raw(approvalSelect+` WHERE a.id = ? AND a.session_id = ?`, id, sessionID).Scan(&rows).Error; err != nil {
		return Approval{}, fmt.Errorf("read approval: %w", err)
	}
	if len(rows) == 0 {
		return Approval{}, store.NotFound("approval", id)
	}
	a := rows[0].approval()
	if a.Status != protocol.ApprovalPending {
		return a, orchestrator.Errorf(orchestrator.EConflict, "approval %s was already %s by %s", id, a.Status, a.AnsweredBy)
	}
	if d.Credential != "" && (d.Approve || d.Always) {
		if err := chooseCredential(g, &a, d.Credential); err != nil {
			return a, err
		}
	}
	now := store.FromMillis(store.Millis(tx.Now()))
	a.Status, a.AnsweredBy, a.AnsweredAt, a.Always = protocol.ApprovalDenied, by, &now, false
	if d.Approve || d.Always {
		a.Status, a.Always = protocol.ApprovalApproved, d.Always
	}
	if err := g.Exec(`UPDATE approvals SET status = ?, answered_by = ?, always = ?, answered_at = ? WHERE id = ? AND status = 'pending'`,
		a.Status, a.AnsweredBy, a.Always, store.Millis(now), id).Error; err != nil {
		return Approval{}, fmt.Errorf("answer approval: %w", err)
	}
	var text string
	switch {
	case by == protocol.AnsweredByTimeout:
		text = fmt.Sprintf("denied: nobody answered within %s", a.ExpiresAt.Sub(a.CreatedAt).Round(time.Second))
	case by == protocol.AnsweredByAgent:
		text = "withdrawn: the agent no longer asks"
	case a.Always:
		text = fmt.Sprintf("approved by %s, and %s is always allowed for %s from now on", by, ScopedKind(a.Kind, a.Scope), a.NodeName)
	default:
		text = fmt.Sprintf("%s by %s", a.Status, by)
	}
	if d.Credential != "" && a.Status == protocol.ApprovalApproved {
		text += fmt.Sprintf(", with the credential %s", d.Credential)
	}
	rec := a.Record()
	if err := tx.AppendJSON(a.NodeID, protocol.KindSystem, protocol.SystemData{Type: protocol.SystemApproval, Text: text, Approval: &rec}); err != nil {
		return Approval{}, err
	}
	if a.Always && a.Kind != "" {
		if err := sessions.AllowKind(tx, a.NodeID, ScopedKind(a.Kind, a.Scope)); err != nil {
			return Approval{}, err
		}
	}
	return a, nil
}

// ExpireApprovals denies every pending request whose time ran out by now
// (answered by "timeout"), each with its record, and returns how many.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time) (int, error) {
	var due []struct {
		ID        string
		SessionID string
	}
	if err := s.rdb.WithContext(ctx).Raw(`SELECT id, session_id FROM approvals WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at`,
		store.Millis(now)).Scan(&due).Error; err != nil {
		return 0, fmt.Errorf("read expired approvals: %w", err)
	}
	n := 0
	for _, a := range due {
		_, err := s.st.WithLog(ctx, a.SessionID, func(tx *store.Tx) error {
			_, err := answer(tx, a.SessionID, a.ID, Decision{}, protocol.AnsweredByTimeout)
			return err
		})
		switch orchestrator.ErrorCode(err) {
		case "":
			n++
		case orchestrator.EConflict, orchestrator.ENotFound: // answered or deleted meanwhile
		default:
			return n, err
		}
	}
	return n, nil
}

// NextApprovalExpiry returns when the next pending request runs out of
// time (ok false: none is pending).
func (s *Store) NextApprovalExpiry(ctx context.Context) (time.Time, bool, error) {
	var next *int64
	if err := s.rdb.WithContext(ctx).Raw(`SELECT MIN(expires_at) FROM approvals WHERE status = 'pending'`).Scan(&next).Error; err != nil {
		return time.Time{}, false, fmt.Errorf("read next approval expiry: %w", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return store.FromMillis(*next), true, nil
}

// ScopedKind is the key of a node's approvals policy that a request of
// kind with scope is answered by, and that "Always" sets: kind, or
// kind:scope ("network:proxy.golang.org").
func ScopedKind(kind, scope string) string {
	if scope == "" {
		return kind
	}
	return kind + ":" + scope
}

// cutText shortens s to n bytes for a one-line summary.
func cutText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
