// Package files is what people and agents do with the session's files
// beyond reading and writing them whole (../shared/spec/files.md): the
// text tier (line ranges, line edits with If-Match, search), raw byte
// ranges, file management by path, downloads from a URL, the session's
// key-value store, a cache of hot reads, and the registry of tools that
// serves all of it by name to the agent API (REST and MCP), the native
// agents and the user API, each call audited. The bytes stay in the
// session filesystem (orchestrator/vfs): the mount, the path API and
// these tools see one set of them.
package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// Bounds of the tools' answers and arguments.
const (
	// MaxTextRead bounds the content one read of lines returns; a range
	// past it ends early (truncated, with the last line returned).
	MaxTextRead = 256 << 10
	// MaxBytesRead bounds one read of raw bytes.
	MaxBytesRead = 1 << 20
	// MaxSearchResults bounds the matching lines of one search (default
	// DefaultSearchResults); MaxSearchLine cuts a long matching line.
	MaxSearchResults     = 1000
	DefaultSearchResults = 100
	MaxSearchLine        = 500
	// MaxPattern bounds a regular expression or a glob.
	MaxPattern = 1000
	// SearchTimeout bounds the time of one search.
	SearchTimeout = 5 * time.Second
	// MaxListResults bounds file_list.
	MaxListResults = 1000
	// MaxKeyLen and MaxValueLen bound a key-value entry; MaxKeys the
	// entries of a session.
	MaxKeyLen   = 512
	MaxValueLen = 256 << 10
	MaxKeys     = 10000
	// DefaultCacheBytes is the default size of the cache of hot reads.
	DefaultCacheBytes = 64 << 20
	// DefaultDownloadTimeout bounds one file_download.
	DefaultDownloadTimeout = 5 * time.Minute
)

// Recorder writes the audit row of a file operation; the store's audit
// (the Audit tab) in production.
type Recorder interface {
	RecordFileOp(ctx context.Context, op Audit) error
}

// Audit is one file operation as the audit keeps it.
type Audit struct {
	SessionID string
	NodeID    string // the node acting, or through whose files a person acted
	Actor     string // the person ("" : the node's agent)
	Name      string // the tool or route: file_read_text, upload, ...
	Params    json.RawMessage
	Result    json.RawMessage // nil when Err is set
	Err       string
	Started   time.Time
	Completed time.Time
}

// Config configures a Service.
type Config struct {
	VFS *vfs.VFS // required
	// Recorder keeps the audit (nil: none is kept).
	Recorder Recorder
	// CacheBytes is the size of the cache of hot reads
	// (DefaultCacheBytes; negative: no cache).
	CacheBytes int64
	// DownloadAllowPrivate lets file_download fetch from hosts that are or
	// resolve to private addresses (--git-allow-private); Resolver looks
	// hosts up (nil: the system's).
	DownloadAllowPrivate bool
	Resolver             gitnet.Resolver
	DownloadTimeout      time.Duration
	Logger               *slog.Logger
	Now                  func() time.Time
}

// Service runs the file operations and their tools.
type Service struct {
	cfg   Config
	v     *vfs.VFS
	cache *Cache
	log   *slog.Logger
	tools registry
}

// New checks cfg and returns a Service with its built-in tools.
func New(cfg Config) (*Service, error) {
	if cfg.VFS == nil {
		return nil, errors.New("files config: VFS is required")
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.DownloadTimeout <= 0 {
		cfg.DownloadTimeout = DefaultDownloadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, v: cfg.VFS, cache: NewCache(max(cfg.CacheBytes, 0)), log: cfg.Logger}
	s.tools.byName = map[string]Tool{}
	for _, t := range s.builtins() {
		if err := s.Register(t); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// VFS is the session filesystem the service works on.
func (s *Service) VFS() *vfs.VFS { return s.v }

// Cache is the cache of hot reads (and of parsed files).
func (s *Service) Cache() *Cache { return s.cache }

// Caller is who does a file operation, and the files it reaches.
type Caller struct {
	SessionID string // the session: its key-value store, its audit
	// NodeID is the node acting, or the node through whose files a person
	// acts ("" : the session's workspace).
	NodeID string
	// Actor is the person acting ("" : the node's agent).
	Actor string
	// FS is the files the caller reaches: the node's workspace (its fork,
	// if it has one) within its allowed paths, or the session's.
	FS *vfs.FS
}

// NodeFS returns the files of node nodeID as its mount sees them: its
// workspace (its fork, when it was spawned with one) within the allowed
// paths of its config. A policy that cannot be read refuses everything.
func (s *Service) NodeFS(ctx context.Context, sessionID, nodeID string, config json.RawMessage) (*vfs.FS, error) {
	ws, err := s.v.WorkspaceOfNode(ctx, sessionID, nodeID)
	if err != nil {
		return nil, err
	}
	allowed, err := paths.AllowedPaths(config)
	var fs *vfs.FS
	if err == nil {
		fs, err = s.v.Session(ws).ForNode(nodeID, allowed)
	}
	if err != nil {
		return nil, orchestrator.Errorf(orchestrator.EForbidden, "node %s has an invalid files policy (%s); the session's owner must fix its config", nodeID, orchestrator.ErrorMessage(err))
	}
	return fs, nil
}

// Do runs op as file operation name of c and audits it: params (JSON, long
// strings cut) and the answer's summary or the error.
func Do[T any](s *Service, ctx context.Context, c Caller, name string, params any, op func() (T, error)) (T, error) {
	start := s.cfg.Now()
	out, err := op()
	s.audit(ctx, c, name, params, out, err, start)
	return out, err
}

func (s *Service) audit(ctx context.Context, c Caller, name string, params, out any, err error, start time.Time) {
	if s.cfg.Recorder == nil {
		return
	}
	a := Audit{SessionID: c.SessionID, NodeID: c.NodeID, Actor: c.Actor, Name: name, Started: start, Completed: s.cfg.Now()}
	a.Params = auditJSON(params)
	switch {
	case errors.Is(err, context.Canceled):
		a.Err = "canceled: the caller went away"
	case err != nil:
		a.Err = orchestrator.ErrorMessage(err)
	default:
		a.Result = auditJSON(summaryOf(out))
	}
	// Written whatever happened to the request: the audit outlives it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.cfg.Recorder.RecordFileOp(wctx, a); rerr != nil {
		s.log.Warn("write the audit of a file operation", "session", c.SessionID, "node", c.NodeID, "op", name, "err", rerr)
	}
}

// Summarizer is an answer that says what the audit keeps of it.
type Summarizer interface{ AuditSummary() any }

func summaryOf(out any) any {
	if s, ok := out.(Summarizer); ok {
		return s.AuditSummary()
	}
	return out
}

// auditText bounds a string in the audit; auditBytes a whole value.
const (
	auditText  = 200
	auditBytes = 2 << 10
)

// auditJSON is v as the audit keeps it: long strings cut, and a value
// still too long replaced by its start.
func auditJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil
		}
	}
	var x any
	if json.Unmarshal(b, &x) == nil {
		b, _ = json.Marshal(cutStrings(x))
	}
	if len(b) > auditBytes {
		b, _ = json.Marshal(map[string]string{"cut": string(b[:auditBytes]) + "…"})
	}
	return b
}

func cutStrings(x any) any {
	switch v := x.(type) {
	case string:
		return cutText(v, auditText)
	case map[string]any:
		for k, e := range v {
			v[k] = cutStrings(e)
		}
	case []any:
		if len(v) > 20 {
			v = append(v[:20:20], fmt.Sprintf("… %d more", len(v)-20))
		}
		for i, e := range v {
			v[i] = cutStrings(e)
		}
		return v
	}
	return x
}

// cutText keeps the first n bytes of s (whole runes), marking a cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
