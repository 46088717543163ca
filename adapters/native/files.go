package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Bounds of the file tools' answers.
const (
	readMaxLines   = 2000      // lines per read_file call
	readMaxBytes   = 100 << 10 // bytes of one read_file answer
	readMaxLineLen = 2000      // characters of one line shown
	globMaxResults = 500
	grepMaxMatches = 200
	grepMaxLineLen = 300
	grepMaxFile    = 8 << 20 // bigger files are not searched
	walkMaxEntries = 200000  // entries one glob or grep visits
	binarySniff    = 8 << 10
)

// workspace holds the file tools' state: the root every path must stay
// under and the files read in this session (edit_file and overwriting
// write_file need one, so the model never changes what it has not seen).
type workspace struct {
	root string // absolute, symlinks resolved
	read map[string]fileStamp
}

// fileStamp identifies a file's content as last seen by the agent.
type fileStamp struct {
	size  int64
	mtime time.Time
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{size: fi.Size(), mtime: fi.ModTime()} }

func newWorkspace(root string) (*workspace, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", root, err)
	}
	return &workspace{root: real, read: map[string]fileStamp{}}, nil
}

// resolve turns a path the model gave (relative to the workspace or
// absolute under it) into an absolute path, and its display form (relative
// to the workspace). A path that leaves the workspace, also through a
// symbolic link, is refused.
func (w *workspace) resolve(p string) (abs, rel string, err error) {
	if strings.TrimSpace(p) == "" {
		return "", "", errors.New("path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", "", errors.New("path contains a NUL byte")
	}
	if filepath.IsAbs(p) {
		abs = filepath.Clean(p)
		// Absolute paths name the workspace as /workspace; the root may be
		// elsewhere outside a container (tests).
		if r, ok := cutDirPrefix(abs, "/workspace"); ok && !within(abs, w.root) {
			abs = filepath.Join(w.root, r)
		}
	} else {
		abs = filepath.Join(w.root, p)
	}
	if !within(abs, w.root) {
		return "", "", fmt.Errorf("%s is outside the workspace (%s): paths are relative to it or absolute under it", p, w.displayRoot())
	}
	real, err := realPath(abs)
	if err != nil {
		return "", "", err
	}
	if !within(real, w.root) {
		return "", "", fmt.Errorf("%s leads outside the workspace through a symbolic link", p)
	}
	rel, _ = filepath.Rel(w.root, real)
	return real, filepath.ToSlash(rel), nil
}

func (w *workspace) displayRoot() string { return "/workspace" }

// realPath resolves the symbolic links of the longest existing prefix of p.
func realPath(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func within(p, root string) bool {
	_, ok := cutDirPrefix(p, root)
	return ok
}

// cutDirPrefix reports whether p is dir or under it, and the rest of p.
func cutDirPrefix(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	if dir == "/" {
		return p[1:], true
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok
}

// isBinary reports whether the start of b holds a NUL byte.
func isBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0 }

// readFile is the read_file tool: lines offset.. (1-based) with their
// numbers, at most limit lines and readMaxBytes bytes.
func (w *workspace) readFile(p string, offset, limit int) (rel, out string, err error) {
	abs, rel, err := w.resolve(p)
	if err != nil {
		return rel, "", err
	}
	f, err := os.Open(abs)
	if err != nil {
		return rel, "", friendly(err, rel)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rel, "", err
	}
	if fi.IsDir() {
		return rel, "", fmt.Errorf("%s is a directory: use glob to list it", rel)
	}
	if offset < 1 {
		offset = 1
	}
	if limit <= 0 || limit > readMaxLines {
		limit = readMaxLines
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniff); isBinary(head) {
		w.read[abs] = stampOf(fi)
		return rel, fmt.Sprintf("%s is a binary file of %d bytes; it is not shown", rel, fi.Size()), nil
	}
	var b strings.Builder
	n, shown, last := 0, 0, 0
	full := false
	for {
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			if err != io.EOF {
				return rel, "", err
			}
			break
		}
		n++
		if n < offset || full {
			continue
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if len(line) > readMaxLineLen {
			line = line[:runeStart(line, readMaxLineLen)] + " …[line cut]"
		}
		entry := fmt.Sprintf("%6d\t%s\n", n, line)
		if shown == limit || b.Len()+len(entry) > readMaxBytes {
			full = true
			continue
		}
		b.WriteString(entry)
		shown++
		last = n
	}
	w.read[abs] = stampOf(fi)
	switch {
	case n == 0:
		return rel, fmt.Sprintf("%s is empty", rel), nil
	case shown == 0:
		return rel, fmt.Sprintf("%s has %d lines; offset %d is past its end", rel, n, offset), nil
	case offset > 1 || last < n:
		fmt.Fprintf(&b, "(lines %d-%d of %d", offset, last, n)
		if last < n {
			fmt.Fprintf(&b, "; read on with offset %d", last+1)
		}
		b.WriteString(")\n")
	}
	return rel, b.String(), nil
}

// checkRead refuses to change a file the agent has not read, or that
// changed since it read it.
func (w *workspace) checkRead(abs, rel string, fi os.FileInfo) error {
	st, ok := w.read[abs]
	if !ok {
		return fmt.Errorf("read %s with read_file first: a file is changed only after it has been read in this session", rel)
	}
	if st != stampOf(fi) {
		return fmt.Errorf("%s changed since you read it (another agent, a command or the user changed it): read it again first", rel)
	}
	return nil
}

// writeFile is the write_file tool. A new file is created with its
// directories; an existing one must have been read first.
func (w *workspace) writeFile(p, content string) (rel, out string, err error) {
	abs, rel, err := w.resolve(p)
	if err != nil {
		return rel, "", err
	}
	mode := os.FileMode(0o644)
	fi, err := os.Stat(abs)
	switch {
	case err == nil && fi.IsDir():
		return rel, "", fmt.Errorf("%s is a directory", rel)
	case err == nil:
		if err := w.checkRead(abs, rel, fi); err != nil {
			return rel, "", fmt.Errorf("%s exists: %w (or use edit_file)", rel, err)
		}
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return rel, "", friendly(err, rel)
		}
	default:
		return rel, "", friendly(err, rel)
	}
	if err := w.replace(abs, []byte(content), mode); err != nil {
		return rel, "", friendly(err, rel)
	}
	verb := "created"
	if fi != nil {
		verb = "overwrote"
	}
	return rel, fmt.Sprintf("%s %s (%d bytes, %d lines)", verb, rel, len(content), lineCount(content)), nil
}

// editFile is the edit_file tool: replace old with new in a file read
// before; old must occur exactly once unless all is set.
func (w *workspace) editFile(p, old, new string, all bool) (rel, out string, err error) {
	abs, rel, err := w.resolve(p)
	if err != nil {
		return rel, "", err
	}
	if old == "" {
		return rel, "", errors.New("old_string is empty: to create or replace a whole file use write_file")
	}
	if old == new {
		return rel, "", errors.New("old_string and new_string are the same: nothing to change")
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return rel, "", friendly(err, rel)
	}
	if fi.IsDir() {
		return rel, "", fmt.Errorf("%s is a directory", rel)
	}
	if err := w.checkRead(abs, rel, fi); err != nil {
		return rel, "", err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return rel, "", friendly(err, rel)
	}
	content := string(b)
	n := strings.Count(content, old)
	switch {
	case n == 0:
		return rel, "", fmt.Errorf("old_string was not found in %s (it must match exactly, whitespace and indentation included): read the file again and copy the text", rel)
	case n > 1 && !all:
		return rel, "", fmt.Errorf("old_string occurs %d times in %s: give more surrounding lines to make it unique, or set replace_all", n, rel)
	}
	first := strings.Index(content, old)
	var updated string
	if all {
		updated = strings.ReplaceAll(content, old, new)
	} else {
		updated = content[:first] + new + content[first+len(old):]
	}
	if err := w.replace(abs, []byte(updated), fi.Mode().Perm()); err != nil {
		return rel, "", friendly(err, rel)
	}
	s := fmt.Sprintf("edited %s: %d replacement", rel, n)
	if n > 1 {
		s += "s"
	}
	line := strings.Count(updated[:first], "\n") + 1
	return rel, s + "\n" + excerpt(updated, line, lineCount(new)), nil
}

// excerpt shows lines from-3 .. from+n+2 of s, numbered.
func excerpt(s string, from, n int) string {
	lines := strings.Split(s, "\n")
	lo, hi := max(from-3, 1), min(from+max(n, 1)+2, len(lines))
	var b strings.Builder
	for i := lo; i <= hi && i-lo < 40; i++ {
		l := lines[i-1]
		if len(l) > readMaxLineLen {
			l = l[:runeStart(l, readMaxLineLen)] + " …"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i, l)
	}
	return b.String()
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

// replace writes a file whole through a temporary file and a rename, so
// nobody ever sees it half-written, and remembers it as read.
func (w *workspace) replace(abs string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, abs)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if fi, err := os.Stat(abs); err == nil {
		w.read[abs] = stampOf(fi)
	}
	return nil
}

// friendly words common file errors for the model, with the workspace path.
func friendly(err error, rel string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist (use glob to find files)", rel)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", rel)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", rel, pe.Err)
	}
	return err
}

// glob is the glob tool: paths under the workspace matching pattern, where
// "**" matches any number of directories. .git is skipped unless the
// pattern names it.
func (w *workspace) glob(pattern string) (string, error) {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" {
		return "", errors.New("pattern is required")
	}
	if filepath.IsAbs(pattern) {
		rest, ok := cutDirPrefix(path.Clean(pattern), "/workspace")
		if !ok {
			rest, ok = cutDirPrefix(path.Clean(pattern), w.root)
		}
		if !ok {
			return "", fmt.Errorf("%s is outside the workspace", pattern)
		}
		pattern = rest
	}
	pattern = path.Clean(pattern)
	if pattern == ".." || strings.HasPrefix(pattern, "../") {
		return "", fmt.Errorf("%s is outside the workspace", pattern)
	}
	segs := strings.Split(pattern, "/")
	for _, s := range segs {
		if _, err := path.Match(s, ""); err != nil {
			return "", fmt.Errorf("bad pattern %q: %v", pattern, err)
		}
	}
	// Walk from the longest literal prefix of the pattern.
	lit := 0
	for lit < len(segs)-1 && !hasMeta(segs[lit]) {
		lit++
	}
	base := path.Join(segs[:lit]...)
	abs, _, err := w.resolve(path.Join(".", base))
	if err != nil {
		return "", err
	}
	deep := false
	for _, s := range segs {
		deep = deep || s == "**"
	}
	wantGit := strings.Contains(pattern, ".git")
	var matches []string
	visited, more := 0, false
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip
		}
		visited++
		if visited > walkMaxEntries {
			more = true
			return fs.SkipAll
		}
		rel, _ := filepath.Rel(w.root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".git" && !wantGit {
			return fs.SkipDir
		}
		if rel == "." {
			return nil
		}
		parts := strings.Split(rel, "/")
		if matchSegs(segs, parts) {
			if len(matches) == globMaxResults {
				more = true
				return fs.SkipAll
			}
			if d.IsDir() {
				rel += "/"
			}
			matches = append(matches, rel)
		}
		if d.IsDir() && !deep && len(parts) >= len(segs) {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return "no paths match " + pattern, nil
	}
	out := strings.Join(matches, "\n") + "\n"
	if more {
		out += fmt.Sprintf("(stopped after %d results or %d entries visited: narrow the pattern)\n", globMaxResults, walkMaxEntries)
	}
	return out, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// matchSegs matches path segments against pattern segments; "**" matches
// zero or more segments.
func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// grep is the grep tool: lines matching a regular expression (RE2 syntax)
// in a file or under a directory, as path:line: text.
func (w *workspace) grep(pattern, p string) (rel, out string, err error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", "", fmt.Errorf("bad regular expression (RE2 syntax): %v", err)
	}
	if p == "" {
		p = "."
	}
	abs, rel, err := w.resolve(p)
	if err != nil {
		return rel, "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return rel, "", friendly(err, rel)
	}
	var b strings.Builder
	matches, files, visited := 0, 0, 0
	more := false
	err = filepath.WalkDir(abs, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		visited++
		if visited > walkMaxEntries {
			more = true
			return fs.SkipAll
		}
		if d.IsDir() {
			if d.Name() == ".git" && fp != abs {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > grepMaxFile {
			return nil
		}
		files++
		name, _ := filepath.Rel(w.root, fp)
		n, full := grepFile(fp, filepath.ToSlash(name), re, &b, grepMaxMatches-matches)
		matches += n
		if full {
			more = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return rel, "", err
	}
	if matches == 0 {
		return rel, fmt.Sprintf("no matches for %q in %s (%d files searched)", pattern, rel, files), nil
	}
	if more {
		fmt.Fprintf(&b, "(stopped after %d matches: narrow the pattern or the path)\n", matches)
	}
	return rel, b.String(), nil
}

// grepFile appends up to room matches of re in file fp to b; full reports
// that there were more.
func grepFile(fp, name string, re *regexp.Regexp, b *strings.Builder, room int) (n int, full bool) {
	f, err := os.Open(fp)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniff); isBinary(head) {
		return 0, false
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if !re.Match(sc.Bytes()) {
			continue
		}
		if n == room {
			return n, true
		}
		t := sc.Text()
		if len(t) > grepMaxLineLen {
			t = t[:runeStart(t, grepMaxLineLen)] + " …"
		}
		fmt.Fprintf(b, "%s:%d: %s\n", name, line, t)
		n++
	}
	return n, false
}
