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
	"syscall"
	"time"

	approvals "github.com/filepath-dev/filepath/adapters/internal/approval"
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
		// A 404 that is not the API's answer about a thing (no route, or
		// not the agent API at all) wraps approvals.ErrNotServed: the
		// caller falls back to what works without the agent API.
		return approvals.DecodeError(resp.StatusCode, b)
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

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("native-%x", b)
}
