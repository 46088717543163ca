package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// An approval request Codex no longer waits for is withdrawn from the
// inbox: the adapter stops, the turn is interrupted (Codex clears the
// request: serverRequest/resolved), or the turn ends without that
// notification. The test binary plays `codex app-server` (fakeCodex).

func TestMain(m *testing.M) {
	if mode := os.Getenv("FILEPATH_TEST_FAKE_CODEX"); mode != "" {
		os.Exit(fakeCodex(mode))
	}
	os.Exit(m.Run())
}

// approvalRPC is the JSON-RPC id of the fake's approval request.
const approvalRPC = 700

// fakeCodex answers the driver as codex app-server 0.169 does: a turn runs
// a command it asks approval for (item/commandExecution/requestApproval)
// and waits. An interrupt clears the request as codex 0.169.0 did when
// probed in its image: the interrupt's answer, turn/completed "interrupted",
// then serverRequest/resolved {threadId, requestId}. Mode "no-resolved"
// leaves the notification out (an older server); mode "held" sends it at
// once but keeps the turn until its input closes, so that only the
// notification can withdraw the request. Every line it reads is appended to
// FILEPATH_TEST_FAKE_CODEX_LOG.
func fakeCodex(mode string) int {
	logf, err := os.OpenFile(os.Getenv("FILEPATH_TEST_FAKE_CODEX_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 2
	}
	defer logf.Close()
	out := bufio.NewWriter(os.Stdout)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	const thread, turn = "th_1", "tu_1"
	turnObj := func(status string) map[string]any {
		return map[string]any{"id": turn, "items": []any{}, "status": status, "error": nil}
	}
	command := map[string]any{"type": "commandExecution", "id": "call_1", "command": "/bin/bash -lc 'curl -s https://example.com'",
		"cwd": "/workspace", "status": "inProgress", "commandActions": []any{}}
	resolved := func() {
		send(map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": thread, "requestId": approvalRPC}})
	}
	endTurn := func() {
		send(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": thread, "turn": turnObj("interrupted")}})
	}
	held := false
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		logf.Write(append(sc.Bytes(), '\n'))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(sc.Bytes(), &m)
		switch m.Method {
		case "initialize":
			send(map[string]any{"id": m.ID, "result": map[string]any{"userAgent": "fake", "platformFamily": "unix", "platformOs": "linux"}})
		case "thread/start":
			send(map[string]any{"id": m.ID, "result": map[string]any{"thread": map[string]any{"id": thread}}})
			send(map[string]any{"method": "thread/started", "params": map[string]any{"thread": map[string]any{"id": thread}}})
		case "turn/start":
			send(map[string]any{"id": m.ID, "result": map[string]any{"turn": turnObj("inProgress")}})
			send(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": thread, "turn": turnObj("inProgress")}})
			send(map[string]any{"method": "item/started", "params": map[string]any{"item": command, "threadId": thread, "turnId": turn}})
			send(map[string]any{"id": approvalRPC, "method": "item/commandExecution/requestApproval", "params": map[string]any{
				"threadId": thread, "turnId": turn, "itemId": "call_1", "command": command["command"], "cwd": "/workspace", "reason": "fetch the page"}})
		case "turn/interrupt":
			if mode == "held" {
				resolved()
				send(map[string]any{"id": m.ID, "result": map[string]any{}})
				held = true
				continue
			}
			send(map[string]any{"id": m.ID, "result": map[string]any{}})
			endTurn()
			if mode != "no-resolved" {
				resolved()
			}
		}
	}
	if held {
		endTurn()
	}
	return 0
}

// inbox is the approvals routes of the agent API; its long poll waits
// until the request is answered or withdrawn.
type inbox struct {
	t        *testing.T
	mu       sync.Mutex
	posts    []map[string]any
	polling  int // GETs under way
	deletes  []string
	answered chan struct{} // closed by the DELETE
}

func (f *inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer fp_test" {
		f.t.Errorf("%s %s without the node's token", r.Method, r.URL)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/approvals":
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.posts = append(f.posts, body)
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "pending"})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/approvals/ap1":
		if r.URL.Query().Get("wait") == "" {
			f.t.Errorf("GET %s without wait", r.URL)
		}
		f.mu.Lock()
		f.polling++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.polling--
			f.mu.Unlock()
		}()
		select {
		case <-f.answered:
			json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "denied", "answered_by": "agent"})
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
			json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "pending"})
		}
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/api/v1/approvals/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/approvals/")
		// A DELETE counts once answered, and takes a while: an adapter
		// that exits without waiting for it loses it.
		time.Sleep(300 * time.Millisecond)
		f.mu.Lock()
		f.deletes = append(f.deletes, id)
		first := len(f.deletes) == 1
		f.mu.Unlock()
		if id != "ap1" || !first {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "conflict", "message": "already answered"}})
			return
		}
		close(f.answered)
		json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "denied", "answered_by": "agent"})
	default:
		f.t.Errorf("unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

func (f *inbox) state() (posts int, polling int, deletes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.posts), f.polling, append([]string(nil), f.deletes...)
}

func TestCodexWithdrawsAnApprovalItNoLongerWaitsFor(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, mode string
		// act makes Codex stop waiting; the driver must have withdrawn
		// the request by the time Run returns, or (withdrawn) before it
		// is told to end.
		act       func(cmds chan<- run.Command, cancel context.CancelFunc)
		withdrawn bool
		end       run.Op
	}{
		{name: "the adapter stops", mode: "resolved", act: func(cmds chan<- run.Command, _ context.CancelFunc) { cmds <- run.Command{Op: run.Stop} }},
		{name: "the adapter is cancelled", mode: "resolved", act: func(_ chan<- run.Command, cancel context.CancelFunc) { cancel() }},
		{name: "the turn is interrupted and codex clears the request", mode: "held", withdrawn: true, end: run.Stop,
			act: func(cmds chan<- run.Command, _ context.CancelFunc) { cmds <- run.Command{Op: run.Interrupt} }},
		{name: "the turn ends without serverRequest/resolved", mode: "no-resolved", withdrawn: true, end: run.Finish,
			act: func(cmds chan<- run.Command, _ context.CancelFunc) { cmds <- run.Command{Op: run.Interrupt} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := &inbox{t: t, answered: make(chan struct{})}
			srv := httptest.NewServer(api)
			defer srv.Close()
			dir := t.TempDir()
			fakeLog := filepath.Join(dir, "stdin.jsonl")
			cfg := run.Config{Agent: "codex", Bin: self, Workspace: dir, StateDir: filepath.Join(dir, "state"),
				APIURL: srv.URL, APIKey: "fp_test", Grace: 4 * time.Second, Stderr: io.Discard,
				Env: append(os.Environ(), "FILEPATH_TEST_FAKE_CODEX="+tt.mode, "FILEPATH_TEST_FAKE_CODEX_LOG="+fakeLog),
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			state, err := run.OpenState(cfg.StateDir, "codex")
			if err != nil {
				t.Fatal(err)
			}
			drv := New(cfg, state)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmds := make(chan run.Command, 4)
			done := make(chan error, 1)
			go func() { done <- drv.Run(ctx, cmds, func(protocol.Event) {}) }()
			cmds <- run.Command{Op: run.Send, Text: "fetch https://example.com"}

			// Asked in the inbox, and the adapter's long poll waits.
			testkit.Eventually(t, 20*time.Second, "long poll of the approval request", func() bool {
				posts, polling, _ := api.state()
				return posts == 1 && polling > 0
			})
			tt.act(cmds, cancel)
			if tt.withdrawn {
				testkit.Eventually(t, 20*time.Second, "withdrawal while the adapter runs", func() bool {
					_, _, deletes := api.state()
					return len(deletes) > 0
				})
				cmds <- run.Command{Op: tt.end}
			}
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the driver did not end")
			}
			posts, _, deletes := api.state()
			if posts != 1 || len(deletes) != 1 || deletes[0] != "ap1" {
				t.Errorf("%d POSTs, DELETEs %q when Run returned: want the request withdrawn once (DELETE ap1)", posts, deletes)
			}
			b, err := os.ReadFile(fakeLog)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var m struct {
					ID     *int   `json:"id"`
					Method string `json:"method"`
				}
				if json.Unmarshal([]byte(l), &m) == nil && m.ID != nil && *m.ID == approvalRPC && m.Method == "" {
					t.Errorf("codex was answered the request it no longer waits for: %s", l)
				}
			}
		})
	}
}
