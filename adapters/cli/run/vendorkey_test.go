package run

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFetchVendorKey: the adapter reads the key FILEPATH_VENDOR_KEY names
// from the agent API with the node's token and gives it to the CLI; a
// refusal is an error naming the key and the server's reason; no name,
// no request.
func TestFetchVendorKey(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		if r.URL.Path != "/api/v1/vendor-key" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer fp_node" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"invalid API key"}}`))
			return
		}
		w.Write([]byte(`{"name":"AMP_API_KEY","value":"sgamp_secret"}`))
	}))
	defer srv.Close()
	ctx := context.Background()

	cfg := Config{APIURL: srv.URL, APIKey: "fp_node", Env: []string{"PATH=/bin", EnvVendorKey + "=AMP_API_KEY"}}
	env, err := FetchVendorKey(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Lookup(env, "AMP_API_KEY"); v != "sgamp_secret" {
		t.Fatalf("the CLI's AMP_API_KEY is %q (env %q)", v, env)
	}
	if len(cfg.Env) != 2 {
		t.Fatal("the caller's environment was changed in place")
	}

	cfg.APIKey = "fp_wrong"
	if _, err := FetchVendorKey(ctx, cfg); err == nil || !strings.Contains(err.Error(), "AMP_API_KEY") || !strings.Contains(err.Error(), "invalid API key") {
		t.Fatalf("a refused token: %v", err)
	}
	cfg.Env = []string{EnvVendorKey + "=CURSOR_API_KEY"}
	cfg.APIKey = "fp_node"
	if _, err := FetchVendorKey(ctx, cfg); err == nil || !strings.Contains(err.Error(), "it answered AMP_API_KEY") {
		t.Fatalf("another key answered: %v", err)
	}

	n := len(auth)
	env, err = FetchVendorKey(ctx, Config{APIURL: srv.URL, APIKey: "fp_node", Env: []string{"PATH=/bin"}})
	if err != nil || len(env) != 1 || len(auth) != n {
		t.Fatalf("no key named: env %q, err %v, %d requests", env, err, len(auth)-n)
	}
}
