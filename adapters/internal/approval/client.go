package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Client asks the agent API (FILEPATH_API_URL, the node's token) for a
// person's approval: POST /api/v1/approvals with a request id of the
// caller's (a POST whose answer was lost is sent again and finds the same
// request), then long polls GET /api/v1/approvals/{id} until it is answered.
// Connection failures and 502/503/504 (an orchestrator restarting) are
// retried until the context ends: the request waits durably on the other
// side, so a restart loses nothing.
type Client struct {
	URL   string // FILEPATH_API_URL
	Token string // FILEPATH_API_KEY
	HTTP  *http.Client
	// Wait is how long one long poll asks the server to wait (60 s).
	Wait time.Duration
	// Backoff bounds the pause between retries (5 s).
	Backoff time.Duration
}

// Request is what the person is asked.
type Request struct {
	Action    string `json:"action"`
	Detail    string `json:"detail,omitempty"`
	Kind      string `json:"kind,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Answer is a request as the API answers it.
type Answer struct {
	ID         string `json:"id"`
	Status     string `json:"status"` // pending, approved, denied
	AnsweredBy string `json:"answered_by"`
	Always     bool   `json:"always"`
}

// APIError is an answer of the API that a retry would not change.
type APIError struct {
	Status  int
	Code    string // the error's code, when the answer is the API's error JSON
	Message string
	err     error // ErrNotServed, or nil
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

func (e *APIError) Unwrap() error { return e.err }

// ErrNoAPI is returned when the adapter has no FILEPATH_API_URL.
var ErrNoAPI = errors.New("no FILEPATH_API_URL: there is nobody to ask for approval")

// ErrNotServed is what an *APIError wraps when FILEPATH_API_URL answers,
// but not as the agent API (an older orchestrator, or an LLM upstream
// alone in a test): the caller does without it.
var ErrNotServed = errors.New("the agent API is not available at FILEPATH_API_URL")

// DecodeError is the *APIError of an answer with an error status (≥ 300):
// the API's {"error":{"code","message"}}, or the body itself (cut at 500
// bytes). A 404 that is not the API's answer about a thing (no such route,
// or not the agent API at all) wraps ErrNotServed.
func DecodeError(status int, body []byte) *APIError {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		if status == http.StatusNotFound {
			return &APIError{Status: status, Message: ErrNotServed.Error(), err: ErrNotServed}
		}
		msg := strings.TrimSpace(string(body))
		if len(msg) > 500 {
			n := 500
			for n > 0 && !utf8.RuneStart(msg[n]) {
				n--
			}
			msg = msg[:n] + "…"
		}
		return &APIError{Status: status, Message: msg}
	}
	if status == http.StatusNotFound && (e.Error.Code != "not_found" || strings.Contains(e.Error.Message, "no route")) {
		return &APIError{Status: status, Code: e.Error.Code, Message: ErrNotServed.Error(), err: ErrNotServed}
	}
	return &APIError{Status: status, Code: e.Error.Code, Message: e.Error.Message}
}

// Ask asks and waits for the answer (approved or denied), or until ctx ends.
func (c *Client) Ask(ctx context.Context, req Request) (Answer, error) {
	if c == nil || c.URL == "" {
		return Answer{}, ErrNoAPI
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := c.retry(ctx, func() error { return c.do(ctx, http.MethodPost, "/api/v1/approvals", body, &a) }); err != nil {
		return a, err
	}
	wait := c.Wait
	if wait <= 0 {
		wait = 60 * time.Second
	}
	for a.Status == "pending" {
		path := "/api/v1/approvals/" + url.PathEscape(a.ID) + "?wait=" + url.QueryEscape(wait.String())
		if err := c.retry(ctx, func() error { return c.do(ctx, http.MethodGet, path, nil, &a) }); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Withdraw tells the inbox that a pending request is no longer asked (the
// CLI cancelled its prompt): DELETE /api/v1/approvals/{id}, tried until ctx
// ends. A request answered meanwhile (409) or unknown (404) is no error:
// either way nobody will be asked.
func (c *Client) Withdraw(ctx context.Context, id string) error {
	if c == nil || c.URL == "" || id == "" {
		return nil
	}
	var a Answer
	err := c.retry(ctx, func() error {
		return c.do(ctx, http.MethodDelete, "/api/v1/approvals/"+url.PathEscape(id), nil, &a)
	})
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusConflict || ae.Status == http.StatusNotFound) {
		return nil
	}
	return err
}

// WithdrawWithin bounds how long Abandon tries to withdraw a request.
const WithdrawWithin = 5 * time.Second

// Abandon withdraws a, the answer Ask returned when its ctx ended, if it is
// still pending: whoever asked stopped waiting (the CLI cancelled its
// prompt, the turn was stopped), so the inbox must not keep asking a person
// about it. It is tried for at most WithdrawWithin, although ctx has ended.
func (c *Client) Abandon(ctx context.Context, a Answer) error {
	if a.ID == "" || a.Status != "pending" {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WithdrawWithin)
	defer cancel()
	return c.Withdraw(wctx, a.ID)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, r)
	if err != nil {
		return &APIError{Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err // transport: retried
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		return fmt.Errorf("HTTP %d", resp.StatusCode) // going down or not up yet: retried
	case resp.StatusCode >= 300:
		return DecodeError(resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &APIError{Status: resp.StatusCode, Message: "the API's answer is not JSON: " + err.Error()}
	}
	return nil
}

// retry runs f until it succeeds, fails with an answer of the API, or ctx
// ends; other failures back off from 100 ms up to Backoff.
func (c *Client) retry(ctx context.Context, f func() error) error {
	limit := c.Backoff
	if limit <= 0 {
		limit = 5 * time.Second
	}
	wait := 100 * time.Millisecond
	for {
		err := f()
		var ae *APIError
		if err == nil || errors.As(err, &ae) {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, limit)
	}
}

// Refusal is what the CLI's model reads when an action was not approved:
// why it asked and who said no, and not to work around it.
func Refusal(reason string, a Answer, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("filepath: not allowed: %s; asking the user for approval failed: %v", reason, err)
	case a.AnsweredBy == "timeout":
		return "filepath: not allowed: " + reason + "; nobody answered the request for approval in time, so it was denied. Do not retry it; find another way, or end your turn and say what you need"
	case a.AnsweredBy == "policy":
		return "filepath: not allowed: " + reason + "; this agent's approvals policy denies it. Do not try to get around this: find another way, or end your turn and say what you need"
	}
	who := a.AnsweredBy
	if who == "" {
		who = "the user"
	}
	return fmt.Sprintf("filepath: not allowed: %s; %s denied it. Do not try to get around this: find another way, or end your turn and say what you need", reason, who)
}
