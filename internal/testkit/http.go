package testkit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// Reply is an HTTP answer, its body read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Request sends one request with c (nil: http.DefaultClient) and reads the
// answer; a failure to send or read fails the test. body is nil (none), a
// string or []byte (sent as is) or a value sent as JSON; a request with a
// body says Content-Type: application/json unless hdr (name, value pairs)
// sets another. token, unless empty, goes as "Authorization: Bearer token".
func Request(t testing.TB, c *http.Client, method, url, token string, body any, hdr ...string) Reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// JSON decodes the body into v, failing the test when it is not v's JSON.
func (r Reply) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%d %s: %v", r.Status, r.Body, err)
	}
}
