package relay

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultLogMaxBytes bounds one node's stderr log file; at the bound it is
// rotated to <node>.log.1 (the previous .1 is dropped), so a node keeps at
// most twice this much.
const DefaultLogMaxBytes = 4 << 20

// LogDir keeps each node's stderr as a bounded text file <Dir>/<node>.log.
// Its methods are safe for concurrent use: one relay writes a node's file
// while the API reads it.
type LogDir struct {
	dir string
	max int64

	mu    sync.Mutex // guards files and serialises rotation with reads
	files map[string]*logFile
}

type logFile struct {
	f    *os.File
	size int64
}

// NewLogDir returns a LogDir writing under dir (created if missing); maxBytes
// <= 0 means DefaultLogMaxBytes.
func NewLogDir(dir string, maxBytes int64) (*LogDir, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultLogMaxBytes
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	return &LogDir{dir: dir, max: maxBytes, files: map[string]*logFile{}}, nil
}

func (d *LogDir) path(nodeID string) (string, error) {
	if nodeID == "" || strings.ContainsAny(nodeID, `/\`) || nodeID == "." || nodeID == ".." {
		return "", fmt.Errorf("node id %q is not a file name", nodeID)
	}
	return filepath.Join(d.dir, nodeID+".log"), nil
}

// Write appends lines (each without its newline) to the node's log.
func (d *LogDir) Write(nodeID string, lines ...[]byte) error {
	if len(lines) == 0 {
		return nil
	}
	p, err := d.path(nodeID)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, l := range lines {
		if int64(len(l)) >= d.max {
			l = l[:d.max-1]
		}
		buf.Write(l)
		buf.WriteByte('\n')
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	lf := d.files[nodeID]
	if lf == nil {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("open node log: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("stat node log: %w", err)
		}
		lf = &logFile{f: f, size: st.Size()}
		d.files[nodeID] = lf
	}
	if lf.size+int64(buf.Len()) > d.max && lf.size > 0 {
		lf.f.Close()
		delete(d.files, nodeID)
		if err := os.Rename(p, p+".1"); err != nil {
			return fmt.Errorf("rotate node log: %w", err)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o640)
		if err != nil {
			return fmt.Errorf("open node log: %w", err)
		}
		lf = &logFile{f: f}
		d.files[nodeID] = lf
	}
	n, err := lf.f.Write(buf.Bytes())
	lf.size += int64(n)
	if err != nil {
		return fmt.Errorf("write node log: %w", err)
	}
	return nil
}

// Release closes the node's open file (the relay calls it when it ends).
func (d *LogDir) Release(nodeID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if lf := d.files[nodeID]; lf != nil {
		lf.f.Close()
		delete(d.files, nodeID)
	}
}

// Remove deletes the node's log files (when the node is deleted).
func (d *LogDir) Remove(nodeID string) error {
	p, err := d.path(nodeID)
	if err != nil {
		return err
	}
	d.Release(nodeID)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, q := range []string{p, p + ".1"} {
		if err := os.Remove(q); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove node log: %w", err)
		}
	}
	return nil
}

// Logs returns the last tail lines of the node's stderr log (all of it when
// tail <= 0), each ending in a newline. A node that never wrote stderr has
// an empty log.
func (d *LogDir) Logs(nodeID string, tail int) ([]byte, error) {
	p, err := d.path(nodeID)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var all []byte
	for _, q := range []string{p + ".1", p} {
		b, err := os.ReadFile(q)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read node log: %w", err)
		}
		all = append(all, b...)
	}
	if tail <= 0 {
		return all, nil
	}
	return lastLines(all, tail), nil
}

// lastLines returns the last n newline-terminated lines of b.
func lastLines(b []byte, n int) []byte {
	i := len(b)
	if i > 0 && b[i-1] == '\n' {
		i--
	}
	for ; n > 0; n-- {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			return b
		}
		i = j
	}
	return b[i+1:]
}
