// Command genopenapi writes orchestrator/api/openapi.json, the OpenAPI
// document of the user API generated from its Go types. Run it with
// `go generate ./orchestrator/api/...` from the repository root.
package main

import (
	"fmt"
	"os"

	"github.com/filepath-dev/filepath/orchestrator/api"
)

func main() {
	out := "openapi.json" // go generate runs in the api directory
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	b, err := api.Document()
	if err == nil {
		err = os.WriteFile(out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "genopenapi: %v\n", err)
		os.Exit(1)
	}
}
