// Package web holds the built Svelte UI, embedded into the binary.
package web

import (
	"embed"
	"io/fs"
)

// build is the output of `make web` (npm run build); only .gitkeep before the
// first build.
//
//go:embed all:build
var build embed.FS

// Assets returns the built UI rooted at the build directory (index.html at
// the top when the UI was built).
func Assets() fs.FS {
	sub, err := fs.Sub(build, "build")
	if err != nil {
		panic("web: embedded build directory missing: " + err.Error()) // cannot happen: the embed pattern names it
	}
	return sub
}
