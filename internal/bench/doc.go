// Package bench holds end-to-end benchmarks of the whole server, wired the
// way `filepath serve` wires it (store with the hub as publisher, the
// lifecycle runner on the Docker or process runtime, the HTTP API with its
// WebSocket stream on 127.0.0.1:0), driven by the test agent. It has no
// non-test code; see e2e_bench_test.go and docs/benchmarks/relay.md.
package bench
