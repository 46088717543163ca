package approval

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeError: the API's error answers keep their code and message; a
// 404 that is not the API's answer about a thing (no route, or not the agent
// API at all) says the agent API is not served, so callers do without it.
func TestDecodeError(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		code      string
		message   string
		notServed bool
	}{
		{name: "conflict", status: 409, body: `{"error":{"code":"conflict","message":"already answered"}}`, code: "conflict", message: "already answered"},
		{name: "another node's request", status: 404, body: `{"error":{"code":"not_found","message":"approval a1 not found"}}`, code: "not_found", message: "approval a1 not found"},
		{name: "no route on the agent API", status: 404, body: `{"error":{"code":"not_found","message":"no route GET /api/v1/x on the agent API"}}`, code: "not_found", message: ErrNotServed.Error(), notServed: true},
		{name: "an LLM upstream", status: 404, body: `{"error":{"message":"unknown path /api/v1/approvals"}}`, message: ErrNotServed.Error(), notServed: true},
		{name: "plain 404", status: 404, body: "404 page not found\n", message: ErrNotServed.Error(), notServed: true},
		{name: "plain 500", status: 500, body: " boom \n", message: "boom"},
		{name: "long body is cut", status: 500, body: strings.Repeat("é", 400), message: strings.Repeat("é", 250) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := DecodeError(tt.status, []byte(tt.body))
			if e.Status != tt.status || e.Code != tt.code || e.Message != tt.message {
				t.Errorf("got %+v, want status %d code %q message %q", *e, tt.status, tt.code, tt.message)
			}
			if got := errors.Is(e, ErrNotServed); got != tt.notServed {
				t.Errorf("errors.Is(ErrNotServed) = %v, want %v", got, tt.notServed)
			}
		})
	}
}
