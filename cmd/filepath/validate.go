package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/filepath-dev/filepath/protocol"
)

const validateUsage = `usage: filepath validate [--inputs] [--max-line N] [FILE|-]

Check NDJSON agent output (or, with --inputs, agent input) against the
filepath Agent Protocol. Reads FILE, or stdin when FILE is "-" or absent.
Prints "LINE: reason" for each invalid line, then "N valid, M invalid".
Blank lines are skipped. Exit status: 0 all valid, 1 some invalid, 2 usage.

Example: ./my-agent < inputs.ndjson | filepath validate

`

// runValidate is `filepath validate`.
func runValidate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("filepath validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	inputs := fs.Bool("inputs", false, "check inputs (an agent's stdin) instead of events (its stdout)")
	maxLine := fs.String("max-line", strconv.Itoa(protocol.DefaultMaxLine), "the longest line allowed, in bytes (suffixes KiB, MiB)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), validateUsage)
		fs.PrintDefaults()
	}
	files, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	limit, err := parseLineLimit(*maxLine)
	if err != nil {
		fmt.Fprintf(stderr, "filepath validate: invalid --max-line %q: %v\n", *maxLine, err)
		return 2
	}
	if len(files) > 1 {
		fmt.Fprintf(stderr, "filepath validate: one FILE at most, got %d (%s)\n", len(files), strings.Join(files, ", "))
		return 2
	}
	in, name := stdin, "stdin"
	if len(files) == 1 && files[0] != "-" {
		f, err := os.Open(files[0])
		if err != nil {
			fmt.Fprintf(stderr, "filepath validate: %v\n", err)
			return 2
		}
		defer f.Close()
		in, name = f, files[0]
	}

	decode := func(b []byte) error { _, err := protocol.DecodeEvent(b); return err }
	if *inputs {
		decode = func(b []byte) error { _, err := protocol.DecodeInput(b); return err }
	}
	out := bufio.NewWriter(stdout)
	r := protocol.NewReader(in, limit)
	valid, invalid := 0, 0
	var readErr error
	for ctx.Err() == nil {
		line, err := r.Next()
		var tooLong *protocol.LineTooLongError
		switch {
		case errors.Is(err, io.EOF):
		case errors.As(err, &tooLong):
			invalid++
			fmt.Fprintf(out, "%d: the line is %d bytes, over the limit of %d bytes per line (see --max-line)\n", tooLong.Line, tooLong.Size, tooLong.Limit)
			continue
		case err != nil:
			readErr = err
		default:
			if err := decode(line); err != nil {
				invalid++
				fmt.Fprintf(out, "%d: %v\n", r.Line(), err)
			} else {
				valid++
			}
			continue
		}
		break
	}
	fmt.Fprintf(out, "%d valid, %d invalid\n", valid, invalid)
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "filepath validate: %v\n", err)
		return 1
	}
	switch {
	case readErr != nil:
		fmt.Fprintf(stderr, "filepath validate: read %s: %v\n", name, readErr)
		return 1
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "filepath validate: %v\n", ctx.Err())
		return 1
	case invalid > 0:
		return 1
	}
	return 0
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("validate FILE --inputs"), and returns the positional
// ones. After "--" every argument is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseLineLimit reads a positive byte count up to 1 GiB: 4096, 64KiB, 1MiB.
func parseLineLimit(s string) (int, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, errors.New("want a number of bytes like 4096, 64KiB or 1MiB")
	}
	if n <= 0 || n > 1<<30 {
		return 0, errors.New("must be between 1 byte and 1GiB")
	}
	return int(n), nil
}
