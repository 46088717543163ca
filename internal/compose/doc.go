// Package compose holds the test that brings up compose.yaml with the
// docker-compose tool and runs an agent through the orchestrator it starts.
package compose
