package agenttools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
)

// RESTPrefix is where REST is mounted on the agent-facing API.
const RESTPrefix = "/api/v1/"

// REST returns the tools as plain REST under /api/v1/ (docs/protocol.md,
// "The agent API"). Errors are {"error":{"code","message","field"}}.
func (s *Server) REST() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			c, err := callerOf(r.Context())
			if err != nil {
				writeError(w, err)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
			status, v, err := h(w, r, c)
			if err != nil {
				writeError(w, err)
				return
			}
			if status == 0 {
				return // the handler answered itself
			}
			writeJSON(w, status, v)
		})
	}
	handle("GET /api/v1/vendor-key", s.vendorKey)
	handle("GET /api/v1/self", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		v, err := audited(s, r.Context(), c, "self", nil, func() (Self, error) { return s.Self(r.Context(), c) }, nil)
		return http.StatusOK, v, err
	})
	handle("GET /api/v1/children", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		v, err := s.listChildren(r.Context(), c)
		return http.StatusOK, list(v), err
	})
	handle("POST /api/v1/children", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in SpawnRequest
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		v, err := s.spawn(r.Context(), c, in)
		return http.StatusCreated, v, err
	})
	handle("GET /api/v1/children/wait", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		d, err := duration(r, "timeout")
		if err != nil {
			return 0, nil, err
		}
		v, err := s.waitForChildren(r.Context(), c, d)
		return http.StatusOK, v, err
	})
	handle("GET /api/v1/nodes/{node}/messages", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		after, err := integer(r, "after", 0)
		if err != nil {
			return 0, nil, err
		}
		limit, err := integer(r, "limit", store.DefaultRecordsLimit)
		if err != nil {
			return 0, nil, err
		}
		v, err := s.readMessages(r.Context(), c, r.PathValue("node"), after, int(limit))
		return http.StatusOK, v, err
	})
	handle("POST /api/v1/nodes/{node}/messages", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in struct {
			Content *string `json:"content"`
		}
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		if in.Content == nil {
			return 0, nil, orchestrator.FieldErrorf("content", "field \"content\" is required")
		}
		v, err := s.sendMessage(r.Context(), c, r.PathValue("node"), *in.Content)
		return http.StatusAccepted, v, err
	})
	handle("GET /api/v1/memories", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		limit, err := integer(r, "limit", collab.DefaultMemoryLimit)
		if err != nil {
			return 0, nil, err
		}
		v, err := s.searchMemories(r.Context(), c, r.URL.Query().Get("q"), int(limit))
		return http.StatusOK, list(v), err
	})
	handle("POST /api/v1/memories", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in struct {
			Key  string `json:"key"`
			Text string `json:"text"`
		}
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		v, err := s.storeMemory(r.Context(), c, in.Key, in.Text)
		return http.StatusOK, v, err
	})
	handle("POST /api/v1/approvals", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in ApprovalRequest
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		a, created, err := s.requestApproval(r.Context(), c, in)
		if !created {
			return http.StatusOK, a, err
		}
		return http.StatusCreated, a, err
	})
	handle("GET /api/v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		d, err := duration(r, "wait")
		if err != nil {
			return 0, nil, err
		}
		v, err := s.approval(r.Context(), c, r.PathValue("id"), d)
		return http.StatusOK, v, err
	})
	handle("DELETE /api/v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		v, err := s.approvalWithdraw(r.Context(), c, r.PathValue("id"))
		return http.StatusOK, v, err
	})
	handle("POST /api/v1/push", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in PushRequest
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		a, err := s.requestPush(r.Context(), c, in)
		return http.StatusCreated, a, err
	})
	handle("POST /api/v1/pull-request", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		var in PullRequestAsk
		if err := decode(r.Body, &in); err != nil {
			return 0, nil, err
		}
		a, err := s.requestPullRequest(r.Context(), c, in)
		return http.StatusCreated, a, err
	})
	handle("POST /api/v1/pull-request/{id}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		d, err := duration(r, "wait")
		if err != nil {
			return 0, nil, err
		}
		v, err := s.pushApproved(r.Context(), c, r.PathValue("id"), d)
		if err == nil && v.PullRequest == nil {
			return http.StatusAccepted, v, nil // still waiting for the answer
		}
		return http.StatusOK, v, err
	})
	handle("POST /api/v1/push/{id}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		d, err := duration(r, "wait")
		if err != nil {
			return 0, nil, err
		}
		v, err := s.pushApproved(r.Context(), c, r.PathValue("id"), d)
		if err == nil && v.Result == nil {
			return http.StatusAccepted, v, nil // still waiting for the answer
		}
		return http.StatusOK, v, err
	})
	s.fileRoutes(handle)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r) // sets the path values
			return
		}
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != "" && m != r.Method {
				w.Header().Set("Allow", m)
				writeError(w, &orchestrator.Error{Code: orchestrator.EMethodNotAllowed, Message: fmt.Sprintf("use %s %s", m, r.URL.Path)})
				return
			}
		}
		writeError(w, orchestrator.Errorf(orchestrator.ENotFound, "no route %s %s on the agent API (docs/protocol.md, \"The agent API\")", r.Method, r.URL.Path))
	})
}

type listBody[T any] struct {
	Data []T `json:"data"`
}

func list[T any](v []T) listBody[T] {
	if v == nil {
		v = []T{}
	}
	return listBody[T]{Data: v}
}

// writeError answers err with its status and body as the user API does
// (orchestrator.HTTPStatus and ErrorBodyOf).
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, orchestrator.HTTPStatus(err), orchestrator.ErrorBodyOf(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decode reads one JSON object strictly: unknown fields are errors naming
// the field.
func decode(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return orchestrator.FieldErrorf("", "request body is empty; expected a JSON object")
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			name, _ := strconv.Unquote(f)
			return orchestrator.FieldErrorf(name, "unknown field %s", f)
		}
		return orchestrator.FieldErrorf("", "malformed JSON: %s", msg)
	}
	if dec.More() {
		return orchestrator.FieldErrorf("", "malformed JSON: unexpected data after the object")
	}
	return nil
}

// integer reads a non-negative integer query parameter.
func integer(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, orchestrator.FieldErrorf(name, "query parameter %s=%q: want a whole number of at least 0", name, v)
	}
	return n, nil
}

// duration reads a duration query parameter: "90s", "2m", or seconds.
func duration(r *http.Request, name string) (time.Duration, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 && n < 1e6 {
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, orchestrator.FieldErrorf(name, "query parameter %s=%q: want a duration like 60s or 2m, or seconds", name, v)
	}
	return d, nil
}
