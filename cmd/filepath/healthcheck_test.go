package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	wrongBody := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`<html>`)) }))
	defer wrongBody.Close()
	// A port nobody listens on: listen, note it, close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, okPort, _ := net.SplitHostPort(strings.TrimPrefix(ok.URL, "http://"))

	tests := []struct {
		name   string
		args   []string
		env    string
		code   int
		stderr string
	}{
		{name: "healthy", args: []string{"--addr", strings.TrimPrefix(ok.URL, "http://")}, code: 0},
		{name: "unspecified host asks loopback", args: []string{"--addr", "0.0.0.0:" + okPort}, code: 0},
		{name: "from FILEPATH_ADDR", env: strings.TrimPrefix(ok.URL, "http://"), code: 0},
		{name: "error status", args: []string{"--addr", strings.TrimPrefix(failing.URL, "http://")}, code: 1, stderr: "503"},
		{name: "not the health answer", args: []string{"--addr", strings.TrimPrefix(wrongBody.URL, "http://")}, code: 1, stderr: `not {"ok":true}`},
		{name: "nothing listening", args: []string{"--addr", closed}, code: 1, stderr: "connection refused"},
		{name: "bad address", args: []string{"--addr", "nonsense"}, code: 2, stderr: `address "nonsense"`},
		{name: "extra argument", args: []string{"x"}, code: 2, stderr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FILEPATH_ADDR", tt.env)
			if tt.env == "" {
				t.Setenv("FILEPATH_ADDR", "127.0.0.1:1")
			}
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"healthcheck"}, tt.args...), nil, &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
				t.Fatalf("code %d stderr %q, want %d containing %q", code, errb.String(), tt.code, tt.stderr)
			}
		})
	}
}
