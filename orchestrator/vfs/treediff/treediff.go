// Package treediff compares the trees of a workspace fork by path, without
// reading anything itself: what the fork changed since its fork point
// (Changes) and what merging it into its parent applies and leaves as
// conflicts (Merge). The session filesystem (orchestrator/vfs, doc.go
// "Forks") reads the trees, answers whether two files hold the same bytes,
// and applies the result in one transaction.
package treediff

import (
	"sort"
	"syscall"
)

// Change operations of a fork's diff.
const (
	Added   = "added"
	Changed = "changed"
	Deleted = "deleted"
)

// FileChange is one path that differs between a fork and its fork point.
type FileChange struct {
	Path    string `json:"path"`
	Op      string `json:"op" jsonschema:"enum=added,enum=changed,enum=deleted"`                                                       // added | changed | deleted
	Kind    string `json:"kind" jsonschema:"enum=file,enum=dir,enum=symlink,enum=fifo,enum=socket,enum=char-device,enum=block-device"` // the new one; the old one for deleted
	OldSize int64  `json:"old_size"`
	NewSize int64  `json:"new_size"`
	Binary  bool   `json:"binary,omitempty"` // a file not shown as text (or too large)
	Diff    string `json:"diff,omitempty"`   // unified text diff of a file (vfs.DiffOptions.Text)
	// TextOmitted: a text file whose diff was left out because the diffs
	// before it in the answer reached vfs.MaxDiffText.
	TextOmitted bool `json:"text_omitted,omitempty"`
	// Links: the other paths of the same file (hard links), sorted, when
	// the added or changed path is one of several names of its inode. Its
	// text diff is still that of the path (what a reader of it sees).
	Links []string `json:"links,omitempty"`
}

// Entry is one inode of a workspace tree.
type Entry struct {
	Ino    int64
	Mode   uint32 // type | permissions (agentfs, as st_mode)
	Size   int64
	Gen    int64  // data generation
	Sha    string // cached content hash, "" when not cached
	Target string // symlink target
	Rdev   uint32 // device number of a device
}

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return e.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// Kind is "dir", "symlink", "file", or for a special file "fifo",
// "socket", "char-device" or "block-device".
func (e Entry) Kind() string {
	switch e.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "dir"
	case syscall.S_IFLNK:
		return "symlink"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "char-device"
	case syscall.S_IFBLK:
		return "block-device"
	}
	return "file"
}

// Name is one name of a workspace: name in directory Parent for inode Ino.
type Name struct {
	Parent int64
	Name   string
	Ino    int64
}

// Tree is every path of a workspace (all names of hard links).
type Tree struct {
	Paths  map[string]Entry
	Inodes map[int64]Entry    // every inode, named or not (an open orphan)
	Names  map[int64][]string // the paths of each non-directory inode, sorted
}

// NewTree builds the tree below directory root from a workspace's inodes
// and names (a name of a missing inode is left out).
func NewTree(root int64, inodes map[int64]Entry, names []Name) Tree {
	kids := map[int64][]Name{}
	for _, d := range names {
		kids[d.Parent] = append(kids[d.Parent], d)
	}
	out := Tree{Paths: make(map[string]Entry, len(inodes)), Inodes: inodes, Names: map[int64][]string{}}
	var walk func(dir int64, prefix string)
	walk = func(dir int64, prefix string) {
		for _, d := range kids[dir] {
			e, ok := inodes[d.Ino]
			if !ok {
				continue
			}
			p := prefix + "/" + d.Name
			out.Paths[p] = e
			if e.IsDir() {
				walk(d.Ino, p)
			} else {
				out.Names[d.Ino] = append(out.Names[d.Ino], p)
			}
		}
	}
	walk(root, "")
	for _, ps := range out.Names {
		if len(ps) > 1 {
			sort.Strings(ps)
		}
	}
	return out
}

// Linked reports whether e, a path's entry, is one of several names.
func (t Tree) Linked(e Entry) bool {
	return !e.IsDir() && len(t.Names[e.Ino]) > 1
}

// Others returns the other paths of p's inode (nil when it has one name).
func (t Tree) Others(p string, e Entry) []string {
	if !t.Linked(e) {
		return nil
	}
	out := make([]string, 0, len(t.Names[e.Ino])-1)
	for _, q := range t.Names[e.Ino] {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// Changes lists what differs in tree b from its fork point a, sorted by
// path, where a path names another inode than before only counts when
// either inode has several names (a hard link made or broken) or the old
// one is still in b under another name; otherwise its type, permissions
// and bytes decide: same(ea, eb) reports whether they are the same.
func Changes(a, b Tree, same func(ea, eb Entry) (bool, error)) ([]FileChange, error) {
	var out []FileChange
	for p, eb := range b.Paths {
		ea, ok := a.Paths[p]
		if !ok {
			out = append(out, FileChange{Path: p, Op: Added, Kind: eb.Kind(), NewSize: eb.Size, Links: b.Others(p, eb)})
			continue
		}
		// another inode than before: a hard link made or broken, or the
		// old inode lives on under another name (moved, a copy put here)
		s := ea.Ino == eb.Ino || !(a.Linked(ea) || b.Linked(eb) || len(b.Names[ea.Ino]) > 0)
		if s {
			var err error
			if s, err = same(ea, eb); err != nil {
				return nil, err
			}
		}
		if !s {
			out = append(out, FileChange{Path: p, Op: Changed, Kind: eb.Kind(), OldSize: ea.Size, NewSize: eb.Size, Links: b.Others(p, eb)})
		}
	}
	for p, ea := range a.Paths {
		if _, ok := b.Paths[p]; !ok {
			out = append(out, FileChange{Path: p, Op: Deleted, Kind: ea.Kind(), OldSize: ea.Size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
