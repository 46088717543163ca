// Command fetch is a test client: it GETs a URL through the proxy its
// environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, as curl, git and
// npm read them), without checking TLS certificates, and prints the body,
// or "error: " and why.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fetch URL")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test servers' own certificates
	}}
	resp, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Printf("error: %v", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Printf("error: %s: %s", resp.Status, b)
		os.Exit(1)
	}
	fmt.Printf("%s", b)
}
