package schemagen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/protocol/internal/schemagen"
)

// TestCommittedSchemasAreCurrent fails when protocol/schema/*.json no longer
// match the Go types.
func TestCommittedSchemasAreCurrent(t *testing.T) {
	tests := []struct {
		name     string
		gen      func() ([]byte, error)
		embedded []byte
	}{
		{"event.schema.json", schemagen.Event, protocol.EventSchema()},
		{"input.schema.json", schemagen.Input, protocol.InputSchema()},
		{"record.schema.json", schemagen.Record, protocol.RecordSchema()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := tt.gen()
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join("..", "..", "schema", tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || !bytes.Equal(tt.embedded, want) {
				t.Fatalf("protocol/schema/%s is stale: run `go generate ./protocol/...` and commit the result", tt.name)
			}
		})
	}
}
