// Command genschema writes protocol/schema/*.schema.json. Run it with
// `go generate ./protocol/...` from the repository root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/filepath-dev/filepath/protocol/internal/schemagen"
)

func main() {
	dir := "schema" // go generate runs in the protocol directory
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	for name, gen := range map[string]func() ([]byte, error){
		"event.schema.json":  schemagen.Event,
		"input.schema.json":  schemagen.Input,
		"record.schema.json": schemagen.Record,
	} {
		b, err := gen()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "genschema: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
