package vfs

import (
	"bufio"
	"bytes"
	"context"
	"path"
	"regexp"
	"unsafe"

	"github.com/filepath-dev/filepath/orchestrator"
)

// GrepOptions bound a content search.
type GrepOptions struct {
	Pattern     string // regexp (RE2)
	PathPattern string // optional glob, matched against the base name and the full path
	MaxFiles    int    // files with matches (default 100)
	MaxMatches  int    // matches in total (default 1000)
	MaxLineLen  int    // longer lines are cut (default 500 bytes)
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path       string `json:"path"`
	LineNumber int    `json:"line_number"`
	Line       string `json:"line"`
}

// GrepFile groups the matches of one file.
type GrepFile struct {
	Path    string      `json:"path"`
	Matches []GrepMatch `json:"matches"`
}

// GrepResult is the outcome of Grep; Truncated says a bound was reached.
type GrepResult struct {
	Files     []GrepFile `json:"data"`
	Truncated bool       `json:"truncated"`
}

// Grep searches the text content of every file (binary files, those with a
// NUL in the first 8 KiB, are skipped). Symlinks are not followed.
func (fs *FS) Grep(ctx context.Context, o GrepOptions) (GrepResult, error) {
	if o.Pattern == "" {
		return GrepResult{}, orchestrator.FieldErrorf("pattern", "pattern is required")
	}
	re, err := regexp.Compile(o.Pattern)
	if err != nil {
		return GrepResult{}, orchestrator.FieldErrorf("pattern", "pattern is not a valid regular expression: %v", err)
	}
	if o.PathPattern != "" {
		if _, err := path.Match(o.PathPattern, ""); err != nil {
			return GrepResult{}, orchestrator.FieldErrorf("path_pattern", "path_pattern is not a valid glob: %v", err)
		}
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 100
	}
	if o.MaxMatches <= 0 {
		o.MaxMatches = 1000
	}
	if o.MaxLineLen <= 0 {
		o.MaxLineLen = 500
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return GrepResult{}, err
	}
	res := GrepResult{Files: []GrepFile{}}
	total := 0
	// buf holds the path of the entry being looked at, one buffer for the
	// whole walk: a deep tree costs its size, not the sum of its paths.
	var buf []byte
	var walk func(dir int64) (bool, error)
	walk = func(dir int64) (bool, error) {
		kids, err := fs.children(ctx, fs.v.r, dir)
		if err != nil {
			return false, err
		}
		base := len(buf)
		defer func() { buf = buf[:base] }()
		for _, k := range kids {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			buf = append(append(buf[:base], '/'), k.name...)
			p := view(buf)
			if !fs.allowedPath(p, false) {
				continue
			}
			if k.attr.IsDir() {
				stop, err := walk(k.attr.Ino)
				if stop || err != nil {
					return stop, err
				}
				continue
			}
			if !k.attr.IsRegular() || k.attr.Size == 0 {
				continue
			}
			if o.PathPattern != "" {
				m1, _ := path.Match(o.PathPattern, k.name)
				m2, _ := path.Match(o.PathPattern, p)
				if !m1 && !m2 {
					continue
				}
			}
			if len(res.Files) >= o.MaxFiles {
				res.Truncated = true
				return true, nil
			}
			data := make([]byte, k.attr.Size)
			if err := fs.readChunks(ctx, fs.v.r, k.attr.Ino, cs, data, 0); err != nil {
				return false, err
			}
			if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
				continue
			}
			var gf GrepFile
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(make([]byte, 64<<10), len(data)+1)
			for n := 1; sc.Scan(); n++ {
				line := sc.Bytes()
				if !re.Match(line) {
					continue
				}
				if total >= o.MaxMatches {
					res.Truncated = true
					break
				}
				if len(line) > o.MaxLineLen {
					line = line[:o.MaxLineLen]
				}
				if gf.Path == "" {
					gf.Path = string(buf)
				}
				gf.Matches = append(gf.Matches, GrepMatch{Path: gf.Path, LineNumber: n, Line: string(line)})
				total++
			}
			if len(gf.Matches) > 0 {
				res.Files = append(res.Files, gf)
			}
			if total >= o.MaxMatches && res.Truncated {
				return true, nil
			}
		}
		return false, nil
	}
	if _, err := walk(RootIno); err != nil {
		return GrepResult{}, err
	}
	return res, nil
}

// view returns b as a string without copying, for a call that does not keep
// it: the string changes with b.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
