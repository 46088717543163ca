package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

// runVersion is `filepath version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "filepath version: unexpected argument %q\n", args[0])
		return 2
	}
	fmt.Fprintf(stdout, "filepath %s%s %s %s/%s\n", version, revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// revision returns " (commit abc1234)" from the build's VCS stamp, if any.
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return fmt.Sprintf(" (commit %.12s%s)", rev, dirty)
}
