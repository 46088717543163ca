// Package changes computes what a workspace of the session filesystem
// changed, as git sees it, on the host: the working tree against HEAD
// (uncommitted), HEAD against a base commit (the commit the session was
// cloned at, the fork point, or a ref), the commits between them, each
// file's unified diff with git's rename detection; and the ways the work
// leaves without a forge (archives, a git bundle, a patch series). It reads
// the repository's objects through the session filesystem's inode API
// (go-git over a read-only billy filesystem, gitfs.go), never a git binary
// in an agent's container.
package changes

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Base kinds (Base.Kind).
const (
	BaseClone = "clone" // the commit the session's repository was cloned at
	BaseFork  = "fork"  // a forked node's fork point
	BaseRef   = "ref"   // a branch, tag or commit the user named
	BaseNone  = "none"  // no base: every commit of HEAD's history
)

// Sections of a Changes (FileDiff requests name one).
const (
	SectionUncommitted = "uncommitted" // the working tree against HEAD
	SectionCommitted   = "committed"   // HEAD against the base
)

// File statuses (FileDiff.Status), as git's --name-status letters say them.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
	Renamed  = "renamed"
)

// Bounds of a Changes answer.
const (
	// MaxPatch is the largest patch of one file a Changes carries; a larger
	// one is left out (FileDiff.TooLarge) until asked for alone (full).
	MaxPatch = 256 << 10
	// MaxPatchTotal bounds the patches of one Changes answer; the files
	// after it come without (FileDiff.Omitted).
	MaxPatchTotal = 8 << 20
	// MaxFullFile bounds a file diffed on request ("show anyway").
	MaxFullFile = 16 << 20
	// MaxCommits bounds the commits listed.
	MaxCommits = 500
)

// Base is what the committed changes are measured against.
type Base struct {
	Kind string `json:"kind" jsonschema:"enum=clone,enum=fork,enum=ref,enum=none"`
	// Ref is the name the user gave (kind ref).
	Ref string `json:"ref,omitempty"`
	// Commit is the base commit ("" for none, or a fork point without a
	// repository).
	Commit string `json:"commit,omitempty"`
}

// Commit is one commit of base..HEAD.
type Commit struct {
	ID          string    `json:"id"`
	Subject     string    `json:"subject"`
	Message     string    `json:"message"`
	Author      string    `json:"author"`
	AuthorEmail string    `json:"author_email"`
	When        time.Time `json:"when"`
	Parents     []string  `json:"parents"`
	// Record is the seq of the commit event an agent reported for it and
	// Ref the seq of the tool or command record that made it (0: none
	// known); NodeID is that agent's node.
	Record int64  `json:"record,omitempty"`
	Ref    int64  `json:"ref,omitempty"`
	NodeID string `json:"node_id,omitempty"`
}

// FileDiff is one path that differs.
type FileDiff struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty" jsonschema_description:"the path before a rename"`
	Status  string `json:"status" jsonschema:"enum=added,enum=modified,enum=deleted,enum=renamed"`
	// Similarity of a rename, in percent (git's similarity index).
	Similarity int    `json:"similarity,omitempty"`
	OldMode    string `json:"old_mode,omitempty" jsonschema_description:"git file mode, e.g. 100644"`
	NewMode    string `json:"new_mode,omitempty"`
	OldID      string `json:"old_id,omitempty" jsonschema_description:"git blob id"`
	NewID      string `json:"new_id,omitempty"`
	OldSize    int64  `json:"old_size"`
	NewSize    int64  `json:"new_size"`
	// Binary: a file git shows as binary (a NUL byte in its first 8000).
	Binary bool `json:"binary,omitempty"`
	// Type is the media type of the new (or deleted) content, sniffed.
	Type      string `json:"type,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	// Patch is the unified diff's hunks (from the first "@@"), as git
	// prints them; empty for a binary file, a pure rename or mode change,
	// or one left out.
	Patch string `json:"patch,omitempty"`
	// TooLarge: the patch is over MaxPatch (or a side over MaxFullFile);
	// ask for the file alone with full=true. Omitted: left out because the
	// answer reached MaxPatchTotal (or text=false).
	TooLarge bool `json:"too_large,omitempty"`
	Omitted  bool `json:"omitted,omitempty"`
}

// Changes is a workspace's changes against a base.
type Changes struct {
	// Repository: the workspace has a git repository at its root. Without
	// one, Uncommitted holds the changes since the fork point (a fork) or
	// is empty.
	Repository bool   `json:"repository"`
	Base       Base   `json:"base"`
	Head       string `json:"head,omitempty" jsonschema_description:"HEAD's commit"`
	Branch     string `json:"branch,omitempty" jsonschema_description:"HEAD's branch (empty: detached)"`
	// Commits is base..HEAD, newest first (at most MaxCommits; Truncated
	// says there were more).
	Commits   []Commit `json:"commits"`
	Truncated bool     `json:"truncated,omitempty"`
	// Committed is HEAD against the base; Uncommitted the working tree
	// (tracked and untracked files that .gitignore does not ignore)
	// against HEAD. Sorted by path.
	Committed   []FileDiff `json:"committed"`
	Uncommitted []FileDiff `json:"uncommitted"`
}

// Target is the workspace whose changes are asked for.
type Target struct {
	SessionID string
	// NodeID is the node asking ("" for the session's shared workspace).
	NodeID string
	// Workspace is the vfs workspace (the session id, or a fork's id).
	Workspace string
	// Fork is set when the workspace is a fork: its fork point.
	Fork *vfs.ForkInfo
}

// Options select what Changes computes.
type Options struct {
	// Base: "" (the default: the fork point for a fork, else the clone
	// commit, else none), "clone", "fork", "none", or a ref ("main",
	// "v1.0", a commit id) the repository resolves.
	Base string
	// NoText leaves the patches out (the file list only).
	NoText bool
}

// Bases gives a session's clone commit (orchestrator/store/sessions).
type Bases interface {
	BaseCommit(ctx context.Context, sessionID string) (string, error)
}

// CommitLog gives the commit events of a session's log
// (orchestrator/store).
type CommitLog interface {
	CommitRecords(ctx context.Context, sessionID, nodeID string) ([]store.CommitRecord, error)
}

// Service computes changes. It keeps caches shared by all requests: git
// blob ids of working-tree files by (workspace, inode, data generation)
// and decoded git objects by id (content-addressed, so shared safely).
type Service struct {
	files   *vfs.VFS
	bases   Bases
	log     CommitLog
	objects cache.Object
	blobs   *blobCache
	sizes   *sizeCache
}

// New returns a Service over the session filesystem, the sessions' clone
// commits and their logs.
func New(files *vfs.VFS, bases Bases, log CommitLog) *Service {
	return &Service{
		files:   files,
		bases:   bases,
		log:     log,
		objects: cache.NewObjectLRU(64 * cache.MiByte),
		blobs:   newBlobCache(200_000),
		sizes:   &sizeCache{m: map[plumbing.Hash]int64{}},
	}
}

// errNoRepo: the workspace has no git repository at its root.
var errNoRepo = errors.New("no git repository")

func invalid(format string, args ...any) error {
	return orchestrator.Errorf(orchestrator.EInvalid, format, args...)
}

// blobKey identifies a version of a working-tree file.
type blobKey struct {
	ws        string
	ino, gen  int64
	size      int64
	isSymlink bool
}

// blobCache maps working-tree file versions to their git blob ids. It is
// bounded: past max entries it starts over (the index's stat data answers
// for files git has seen, so a miss costs one hash).
type blobCache struct {
	mu  sync.Mutex
	max int
	m   map[blobKey][20]byte
}

func newBlobCache(max int) *blobCache { return &blobCache{max: max, m: map[blobKey][20]byte{}} }

func (c *blobCache) get(k blobKey) ([20]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return h, ok
}

func (c *blobCache) put(k blobKey, h [20]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = h
}

// sizeCache maps git blob ids to their sizes (content-addressed: shared
// by every repository), learnt from indexes and from blobs read, so a file
// list needs no blob opened. Bounded like blobCache.
type sizeCache struct {
	mu sync.Mutex
	m  map[plumbing.Hash]int64
}

const maxSizes = 500_000

func (c *sizeCache) get(h plumbing.Hash) (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[h]
	return n, ok
}

func (c *sizeCache) put(h plumbing.Hash, n int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxSizes {
		clear(c.m)
	}
	c.m[h] = n
}
