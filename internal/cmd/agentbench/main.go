// Command agentbench times round trips to the agent API from where an
// agent runs (inside its container): the same data as plain REST and as
// MCP tool calls (Streamable HTTP, JSON answers), and GET /healthz as the
// floor of one HTTP round trip on the listener. It prints one line per
// operation: "name median_us p90_us bytes". Used by the agent tools'
// benchmark (orchestrator/agenttools, docs/benchmarks.md).
//
//	agentbench --url $FILEPATH_API_URL --key $FILEPATH_API_KEY --child NAME --n 300
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"
)

func main() {
	url := flag.String("url", os.Getenv("FILEPATH_API_URL"), "the agent-facing API")
	key := flag.String("key", os.Getenv("FILEPATH_API_KEY"), "the node's token")
	child := flag.String("child", "", "the child whose messages are read")
	n := flag.Int("n", 300, "round trips per operation")
	limit := flag.Int("limit", 1000, "records per read")
	flag.Parse()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	mcp := func(tool, args string) func() (*http.Request, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
		return func() (*http.Request, error) {
			r, err := http.NewRequest("POST", *url+"/mcp", bytes.NewReader([]byte(body)))
			if err == nil {
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
			}
			return r, err
		}
	}
	get := func(path string) func() (*http.Request, error) {
		return func() (*http.Request, error) { return http.NewRequest("GET", *url+path, nil) }
	}
	ops := []struct {
		name string
		req  func() (*http.Request, error)
	}{
		{"healthz", get("/healthz")},
		{"rest_list_children", get("/api/v1/children")},
		{"mcp_list_children", mcp("list_children", `{}`)},
		{"rest_read_messages", get(fmt.Sprintf("/api/v1/nodes/%s/messages?limit=%d", *child, *limit))},
		{"mcp_read_child_messages", mcp("read_child_messages", fmt.Sprintf(`{"child":%q,"limit":%d}`, *child, *limit))},
	}
	for _, op := range ops {
		var times []time.Duration
		size := 0
		for i := 0; i < *n+10; i++ { // the first 10 warm up
			req, err := op.req()
			if err != nil {
				fail(err)
			}
			req.Header.Set("Authorization", "Bearer "+*key)
			start := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				fail(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(start)
			if err != nil || resp.StatusCode != 200 || bytes.Contains(b, []byte(`"isError":true`)) {
				fail(fmt.Errorf("%s: %d %v %.300s", op.name, resp.StatusCode, err, b))
			}
			if i >= 10 {
				times = append(times, d)
			}
			size = len(b)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		fmt.Printf("%s %d %d %d\n", op.name, times[len(times)/2].Microseconds(), times[len(times)*9/10].Microseconds(), size)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "agentbench:", err)
	os.Exit(1)
}
