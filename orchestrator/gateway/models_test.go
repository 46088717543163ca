package gateway_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/gateway"
	"github.com/filepath-dev/filepath/orchestrator/models"
)

func modelIDs(l models.List) []string {
	var ids []string
	for _, p := range l.Providers {
		for _, m := range p.Models {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func modelsRequests(up *fakellm.Server) int {
	n := 0
	for _, r := range up.Requests() {
		if r.Format == "models" {
			n++
		}
	}
	return n
}

// TestModelsCached: the live list is fetched with the key, served from the
// cache for an hour, then fetched again.
func TestModelsCached(t *testing.T) {
	ctx := context.Background()
	up := fakellm.New()
	defer up.Close()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	m, err := gateway.NewModels(gateway.ModelsConfig{OpenRouter: gateway.Upstream{APIKey: "or-key", BaseURL: up.URL + "/api/v1"}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Models(ctx)
	if err != nil || l.Offline || l.Note != "" || l.FetchedAt == nil || !l.FetchedAt.Equal(clock.Now()) {
		t.Fatalf("first list %+v, %v", l, err)
	}
	if ids := strings.Join(modelIDs(l), ","); ids != "anthropic/claude-sonnet-4,fake/no-tools,openai/gpt-4.1" {
		t.Fatalf("ids %s", ids)
	}
	if r := up.Requests()[0]; r.Path != "/api/v1/models" || r.Header.Get("Authorization") != "Bearer or-key" {
		t.Fatalf("upstream request %s %v", r.Path, r.Header)
	}
	up.SetModels([]byte(`{"data":[{"id":"new/model","name":"New"}]}`))
	clock.Advance(59 * time.Minute)
	if l, _ := m.Models(ctx); len(modelIDs(l)) != 3 || modelsRequests(up) != 1 {
		t.Fatalf("within the hour: %v, %d fetches", modelIDs(l), modelsRequests(up))
	}
	clock.Advance(time.Minute)
	l, _ = m.Models(ctx)
	if ids := modelIDs(l); len(ids) != 1 || ids[0] != "new/model" || modelsRequests(up) != 2 || !l.FetchedAt.Equal(clock.Now()) {
		t.Fatalf("after the hour: %v, %d fetches", ids, modelsRequests(up))
	}
}

// TestModelsRefreshFailureKeepsLastGood: a failed refresh serves the last
// good list with a note, and is retried only after the retry interval.
func TestModelsRefreshFailureKeepsLastGood(t *testing.T) {
	ctx := context.Background()
	up := fakellm.New()
	defer up.Close()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	m, _ := gateway.NewModels(gateway.ModelsConfig{OpenRouter: gateway.Upstream{APIKey: "k", BaseURL: up.URL}, Now: clock.Now})
	first, _ := m.Models(ctx)
	up.SetModels([]byte(`<html>bad gateway</html>`))
	clock.Advance(2 * time.Hour)
	l, err := m.Models(ctx)
	if err != nil || l.Offline || !strings.Contains(l.Note, "could not refresh") || len(modelIDs(l)) != len(modelIDs(first)) ||
		!l.FetchedAt.Equal(*first.FetchedAt) {
		t.Fatalf("after a failed refresh %+v, %v", l, err)
	}
	n := modelsRequests(up)
	clock.Advance(30 * time.Second)
	m.Models(ctx)
	if modelsRequests(up) != n {
		t.Fatal("retried before the retry interval")
	}
	up.SetModels(nil) // the default list again
	clock.Advance(time.Minute)
	if l, _ := m.Models(ctx); l.Note != "" || modelsRequests(up) != n+1 || !l.FetchedAt.Equal(clock.Now()) {
		t.Fatalf("after the retry interval: %+v (%d fetches)", l, modelsRequests(up))
	}
}

// TestModelsOffline: no key, or an unreachable OpenRouter, gives the bundled
// list marked offline with a note saying why.
func TestModelsOffline(t *testing.T) {
	ctx := context.Background()
	up := fakellm.New()
	defer up.Close()
	m, _ := gateway.NewModels(gateway.ModelsConfig{OpenRouter: gateway.Upstream{BaseURL: up.URL}})
	l, err := m.Models(ctx)
	if err != nil || !l.Offline || !strings.Contains(l.Note, "FILEPATH_OPENROUTER_API_KEY") || len(l.Providers) < 3 || len(up.Requests()) != 0 {
		t.Fatalf("no key: %+v, %v (%d upstream requests)", l, err, len(up.Requests()))
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	m, _ = gateway.NewModels(gateway.ModelsConfig{OpenRouter: gateway.Upstream{APIKey: "k", BaseURL: "http://" + dead + "/api/v1"}})
	l, err = m.Models(ctx)
	if err != nil || !l.Offline || !strings.Contains(l.Note, dead) || len(l.Providers) < 3 || l.FetchedAt != nil {
		t.Fatalf("unreachable: %+v, %v", l, err)
	}
	if _, err := gateway.NewModels(gateway.ModelsConfig{OpenRouter: gateway.Upstream{BaseURL: "ftp://x"}}); err == nil ||
		!strings.Contains(err.Error(), "FILEPATH_OPENROUTER_BASE_URL") {
		t.Fatalf("bad base URL: %v", err)
	}
}
