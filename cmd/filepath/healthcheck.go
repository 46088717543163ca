package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// runHealthcheck is `filepath healthcheck`: it asks a running server's
// /healthz and exits 0 when it answers ok, 1 otherwise. compose.yaml runs it
// inside the orchestrator's container, where no curl or wget exists.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("FILEPATH_ADDR", "127.0.0.1:8080"), "the server's listen address (env FILEPATH_ADDR)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "filepath healthcheck: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	u, err := healthURL(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "filepath healthcheck: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := checkHealth(ctx, u); err != nil {
		fmt.Fprintf(stderr, "filepath healthcheck: %s: %v\n", u, err)
		return 1
	}
	fmt.Fprintf(stdout, "ok %s\n", u)
	return 0
}

// healthURL is the /healthz address of a server listening on addr; an
// unspecified host (0.0.0.0, ::, "") is asked on loopback.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

func checkHealth(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		OK bool `json:"ok"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body); err != nil || !body.OK {
		return fmt.Errorf("answer is not {\"ok\":true}")
	}
	return nil
}
