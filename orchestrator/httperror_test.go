package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// failingRunner fails every start with err; both APIs start agents
// through it, the user API a session, the agent API a child it messages.
type failingRunner struct{ err error }

func (r *failingRunner) StartSession(context.Context, string, string) error { return r.err }
func (r *failingRunner) StopSession(context.Context, string, string) error  { return r.err }
func (r *failingRunner) StartNode(context.Context, string, string, string) error {
	return r.err
}
func (r *failingRunner) Deliver(context.Context, string, string, protocol.Input) (protocol.Record, error) {
	return protocol.Record{}, r.err
}
func (r *failingRunner) Running(string) bool { return false }
func (r *failingRunner) DeleteNode(context.Context, string, string, string) error {
	return r.err
}
func (r *failingRunner) DeleteSession(context.Context, string, string) error { return r.err }
func (r *failingRunner) NodeLog(context.Context, string, string, int) ([]byte, error) {
	return nil, r.err
}
func (r *failingRunner) SpawnChild(context.Context, string, string, protocol.SpawnEvent) (sessions.Node, error) {
	return sessions.Node{}, r.err
}

// TestErrorStatusOnBothAPIs: every error code answers one status, the same
// on the user API and the agent API, with the code in the body: a handler
// of each answers its runner's error.
func TestErrorStatusOnBothAPIs(t *testing.T) {
	want := map[string]int{
		orchestrator.EInvalid:             http.StatusUnprocessableEntity,
		orchestrator.ENotFound:            http.StatusNotFound,
		orchestrator.EConflict:            http.StatusConflict,
		orchestrator.ETooLarge:            http.StatusRequestEntityTooLarge,
		orchestrator.EForbidden:           http.StatusForbidden,
		orchestrator.EPreconditionFailed:  http.StatusPreconditionFailed,
		orchestrator.EInsufficientStorage: http.StatusInsufficientStorage,
		orchestrator.ERangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
		orchestrator.EUnsupportedMedia:    http.StatusUnsupportedMediaType,
		orchestrator.EUnauthorized:        http.StatusUnauthorized,
		orchestrator.EUnavailable:         http.StatusServiceUnavailable,
		orchestrator.EInternal:            http.StatusInternalServerError,
		orchestrator.EMethodNotAllowed:    http.StatusMethodNotAllowed,
	}
	type errCase struct {
		name   string
		err    error
		status int
		code   string
	}
	var cases []errCase
	for _, code := range orchestrator.ErrorCodes() {
		status, ok := want[code]
		if !ok {
			t.Errorf("code %q has no status in this test", code)
			continue
		}
		cases = append(cases, errCase{code, fmt.Errorf("start: %w", orchestrator.Errorf(code, "it failed with %s", code)), status, code})
	}
	cases = append(cases,
		errCase{"malformed", orchestrator.Malformedf("x", "the request is malformed"), http.StatusBadRequest, orchestrator.EInvalid},
		errCase{"uncoded", errors.New("disk on fire"), http.StatusInternalServerError, orchestrator.EInternal},
		errCase{"body over its bound", &http.MaxBytesError{Limit: 10}, http.StatusRequestEntityTooLarge, orchestrator.ETooLarge},
	)

	ctx := context.Background()
	h := hub.New[protocol.Record](hub.Config{})
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "db"), Publisher: h})
	if err != nil {
		t.Fatal(err)
	}
	ident, ss, aud := identity.New(st), sessions.New(st, sessions.Config{}), audit.New(st)
	cs := collab.New(st, ss, collab.Config{})
	t.Cleanup(func() { st.Close(); h.Close() })
	run := &failingRunner{}
	u, err := ident.CreateUser(ctx, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	userKey, _, err := ident.CreateAPIKey(ctx, u.ID, "script")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	root, err := ss.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{AgentType: "shelley"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := ss.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{AgentType: "shelley", ParentID: &root.ID})
	if err != nil {
		t.Fatal(err)
	}

	users, err := api.New(api.Config{Addr: "127.0.0.1:0", Store: st, Users: ident, Sessions: ss, Collab: cs, Audit: aud, Hub: h, Runner: run})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { users.Close() })
	tools, err := agenttools.New(agenttools.Config{Store: st, Sessions: ss, Collab: cs, Audit: aud, Hub: h, Runner: run})
	if err != nil {
		t.Fatal(err)
	}
	agents := tools.REST()

	// userAPI starts the session; agentAPI has the root message its child,
	// which starts it.
	userAPI := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/sessions/"+sess.ID+"/start", nil)
		req.Header.Set("Authorization", "Bearer "+userKey)
		w := httptest.NewRecorder()
		users.Handler().ServeHTTP(w, req)
		return w
	}
	agentAPI := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/nodes/"+child.ID+"/messages", strings.NewReader(`{"content":"go"}`))
		req = req.WithContext(orchestrator.WithCaller(req.Context(), orchestrator.Caller{UserID: u.ID, SessionID: sess.ID, NodeID: root.ID}))
		w := httptest.NewRecorder()
		agents.ServeHTTP(w, req)
		return w
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			run.err = tt.err
			for name, call := range map[string]func() *httptest.ResponseRecorder{"user API": userAPI, "agent API": agentAPI} {
				w := call()
				var body orchestrator.ErrorBody
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("%s: %d %q: %v", name, w.Code, w.Body, err)
				}
				if w.Code != tt.status || body.Error.Code != tt.code {
					t.Errorf("%s: %d %s, want %d %s", name, w.Code, w.Body, tt.status, tt.code)
				}
			}
		})
	}
}

// TestErrorCodesListed: ErrorCodes lists every code constant of errors.go,
// so that the test above walks a new one.
func TestErrorCodesListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !strings.HasPrefix(name.Name, "E") {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				declared = append(declared, v)
			}
		}
	}
	listed := orchestrator.ErrorCodes()
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) < 10 || !slices.Equal(declared, listed) {
		t.Fatalf("errors.go declares the codes %v, ErrorCodes lists %v", declared, listed)
	}
}

// TestHTTPStatusOfCanceled: a request whose caller went away answers 499
// (nobody reads it; it is not logged as a failure), unless its error has a
// code of its own.
func TestHTTPStatusOfCanceled(t *testing.T) {
	canceled := fmt.Errorf("read records: %w", context.Canceled)
	if got := orchestrator.HTTPStatus(canceled); got != orchestrator.StatusClientClosed {
		t.Errorf("canceled: %d", got)
	}
	if got := orchestrator.ErrorBodyOf(canceled).Error.Code; got != orchestrator.CodeCanceled {
		t.Errorf("canceled: code %q", got)
	}
	if got := orchestrator.HTTPStatus(orchestrator.Errorf(orchestrator.EConflict, "busy")); got != http.StatusConflict {
		t.Errorf("coded: %d", got)
	}
	if got := orchestrator.HTTPStatus(nil); got != http.StatusOK {
		t.Errorf("nil: %d", got)
	}
}
