package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// apiClient calls the agent API ($FILEPATH_API_URL/api/v1, docs/protocol.md
// "The agent API") with the node's token.
type apiClient struct {
	base         string // $FILEPATH_API_URL/api/v1
	key          string
	http         *http.Client
	connectRetry time.Duration
	clock        clock
}

// apiError is an answer with an error status.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the agent API answered %d: %s", e.Status, e.Message)
}

// errNoAgentAPI: the orchestrator serves no agent API (an older one, or a
// test upstream): the caller falls back to what works without it.
var errNoAgentAPI = errors.New("the agent API is not available at FILEPATH_API_URL")

const maxAPIBody = 8 << 20

// call sends one request (body: JSON, or nil) and decodes the answer into
// out. Refused connections are retried for connectRetry (the listener
// appears a few milliseconds after the container starts).
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	deadline := c.clock.now().Add(c.connectRetry)
	wait := 20 * time.Millisecond
	var resp *http.Response
	for {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err = c.http.Do(req)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || !c.clock.now().Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
			if resp.StatusCode == http.StatusNotFound {
				return errNoAgentAPI
			}
			return &apiError{Status: resp.StatusCode, Message: cut(strings.TrimSpace(string(b)), 500)}
		}
		// A 404 that is not the API's answer about a node (no route, or
		// not the agent API at all) means there is no agent API.
		if resp.StatusCode == http.StatusNotFound && (e.Error.Code != "not_found" || strings.Contains(e.Error.Message, "no route")) {
			return errNoAgentAPI
		}
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the agent API's answer to %s %s is not what was expected: %v", method, path, err)
	}
	return nil
}

func (c *apiClient) get(ctx context.Context, path string, q url.Values, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.call(ctx, http.MethodGet, path, nil, out)
}

// self is GET /self: the node and its approvals policy.
type self struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Approvals map[string]string `json:"approvals"`
}

// approval is a request for permission, as the API answers it.
type approval struct {
	ID         string `json:"id"`
	Status     string `json:"status"` // pending, approved, denied
	AnsweredBy string `json:"answered_by"`
	Always     bool   `json:"always"`
}

// requestApproval asks for permission and waits for the answer: POST
// /approvals with an id of its own (a POST that lost its answer is sent
// again without making a second request), then long polls GET
// /approvals/{id}. Connection failures (an orchestrator restart) are
// retried until ctx ends; the request waits durably on the other side.
func (c *apiClient) requestApproval(ctx context.Context, action, detail, kind string) (approval, error) {
	body := map[string]string{"action": action, "detail": detail, "kind": kind, "request_id": newRequestID()}
	var a approval
	if err := c.retry(ctx, func() error { return c.call(ctx, http.MethodPost, "/approvals", body, &a) }); err != nil {
		return a, err
	}
	for a.Status == "pending" {
		id := a.ID
		if err := c.retry(ctx, func() error {
			return c.get(ctx, "/approvals/"+url.PathEscape(id), url.Values{"wait": {"60s"}}, &a)
		}); err != nil {
			return a, err
		}
	}
	return a, nil
}

// retry runs f until it succeeds, fails with an answer of the API (which
// a retry would not change), or ctx ends; transport errors back off up to
// 5 s.
func (c *apiClient) retry(ctx context.Context, f func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := f()
		var ae *apiError
		if err == nil || errors.As(err, &ae) || errors.Is(err, errNoAgentAPI) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("native-%x", b)
}
