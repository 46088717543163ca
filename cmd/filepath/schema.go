package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/filepath-dev/filepath/protocol"
)

// runSchema is `filepath schema [--inputs]`: it prints the JSON Schema of
// agent events, or of agent inputs.
func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("filepath schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	inputs := fs.Bool("inputs", false, "print the schema of inputs (stdin) instead of events (stdout)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: filepath schema [--inputs]\n\nPrint the JSON Schema (draft 2020-12) of one agent event line.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "filepath schema: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	s := protocol.EventSchema()
	if *inputs {
		s = protocol.InputSchema()
	}
	if _, err := stdout.Write(s); err != nil {
		fmt.Fprintf(stderr, "filepath schema: %v\n", err)
		return 1
	}
	return 0
}
