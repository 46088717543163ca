package changes

import (
	"context"
	"crypto/sha1"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// readIndex reads the repository's index and the time it was written
// (nil when it cannot be read: a new repository, or git rewriting it just
// now; every file is then hashed).
func (rp *repo) readIndex() (*index.Index, int64) {
	f, err := rp.dot.Open("index")
	if err != nil {
		return nil, 0
	}
	a, err := rp.dot.lookup(rp.dot.abs("index"))
	if err != nil {
		return nil, 0
	}
	idx := &index.Index{}
	if err := index.NewDecoder(f).Decode(idx); err != nil {
		return nil, 0
	}
	return idx, a.Mtime.UnixNano()
}

// worktreeOptions say how a working tree is read.
type worktreeOptions struct {
	ws  string       // workspace id (the blob cache's key)
	idx *index.Index // nil: no index
	// idxTime is when the index was written: an entry whose file changed
	// at or after it is "racily clean" and hashed, as git does.
	idxTime int64
	// hint: blob ids of another working tree whose inodes, at the same data
	// generation, hold the same bytes (a fork's, for its fork point)
	hint map[int64]hinted
	// ignore: apply .gitignore (and .git/info/exclude) to untracked files
	ignore bool
	rp     *repo
}

type hinted struct {
	gen  int64
	hash plumbing.Hash
}

// worktree reads the working tree of workspace fs: every regular file and
// symlink outside .git (and outside nested repositories) that is tracked
// or not ignored, with its git blob id. A file's id comes from the index
// when its stat data matches (git's own shortcut), else from the cache of
// (inode, data generation), else by hashing its content.
func (s *Service) worktree(ctx context.Context, fs *vfs.FS, o worktreeOptions) (flatTree, error) {
	ents, err := fs.Walk(ctx, func(dir string) bool { return path.Base(dir) == ".git" })
	if err != nil {
		return nil, err
	}
	tracked := map[string]*index.Entry{}
	if o.idx != nil {
		for _, e := range o.idx.Entries {
			if e.Stage == index.Merged && !e.IntentToAdd {
				tracked[e.Name] = e
			}
		}
	}
	var match gitignore.Matcher
	if o.ignore {
		match = s.ignoreMatcher(ctx, fs, ents, o.rp)
	}
	// directories with a .git inside (nested repositories) are left out
	// unless the index tracks them (a submodule: its recorded commit)
	nested := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if path.Base(e.Path) == ".git" && path.Dir(e.Path) != "/" {
			nested[trimSlash(path.Dir(e.Path))] = true
		}
	}
	ignoredDirs := map[string]bool{}
	out := flatTree{}
	for _, e := range ents {
		p := trimSlash(e.Path)
		if e.IsDir() {
			d := path.Dir(p)
			if ignoredDirs[d] || nested[d] || (match != nil && match.Match(strings.Split(p, "/"), true)) {
				ignoredDirs[p] = true
			}
			if nested[p] {
				ignoredDirs[p] = true
				if ie, ok := tracked[p]; ok && ie.Mode == filemode.Submodule {
					out[p] = entry{mode: filemode.Submodule, hash: ie.Hash}
				}
			}
			continue
		}
		var mode filemode.FileMode
		switch e.Mode & vfs.ModeType {
		case vfs.ModeRegular:
			mode = filemode.Regular
			if e.Mode&0o100 != 0 {
				mode = filemode.Executable
			}
		case vfs.ModeSymlink:
			mode = filemode.Symlink
		default:
			continue // fifos, sockets, devices: git has no such files
		}
		ie, isTracked := tracked[p]
		if !isTracked {
			if ignoredDirs[path.Dir(p)] || (match != nil && match.Match(strings.Split(p, "/"), false)) {
				continue
			}
		}
		ent := entry{mode: mode, size: e.Size, fs: fs, ino: e.Ino, gen: e.Gen, target: e.Target}
		switch {
		case isTracked && statMatches(ie, e, mode, o.idxTime):
			ent.hash = ie.Hash
		default:
			h, err := s.blobID(ctx, fs, o, e, mode)
			if err != nil {
				return nil, err
			}
			ent.hash = h
		}
		out[p] = ent
	}
	return out, nil
}

// statMatches reports whether a file's stat data is what the index
// recorded when it hashed it, and the file did not change in the same
// instant the index was written (git's racy-clean rule).
func statMatches(ie *index.Entry, e vfs.WalkEntry, mode filemode.FileMode, idxTime int64) bool {
	if ie.Mode != mode || int64(ie.Size) != e.Size&0xffffffff {
		return false
	}
	if ie.Inode != 0 && ie.Inode != uint32(e.Ino) {
		return false
	}
	im := ie.ModifiedAt.UnixNano()
	if ie.ModifiedAt.Nanosecond() == 0 { // written without nanoseconds
		if ie.ModifiedAt.Unix() != e.Mtime/1e9 {
			return false
		}
	} else if im != e.Mtime {
		return false
	}
	if ie.CreatedAt.Unix() != 0 && ie.CreatedAt.Unix() != e.Ctime/1e9 {
		return false
	}
	return idxTime != 0 && e.Mtime < idxTime
}

// blobID returns the git blob id of working-tree file e.
func (s *Service) blobID(ctx context.Context, fs *vfs.FS, o worktreeOptions, e vfs.WalkEntry, mode filemode.FileMode) (plumbing.Hash, error) {
	if h, ok := o.hint[e.Ino]; ok && h.gen == e.Gen && mode != filemode.Symlink {
		return h.hash, nil
	}
	k := blobKey{ws: o.ws, ino: e.Ino, gen: e.Gen, size: e.Size, isSymlink: mode == filemode.Symlink}
	if h, ok := s.blobs.get(k); ok {
		return h, nil
	}
	var data []byte
	if mode == filemode.Symlink {
		data = []byte(e.Target)
	} else {
		b, err := fs.ReadInode(ctx, e.Ino, s.files.Config().MaxFileSize)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read %s: %w", e.Path, err)
		}
		data = b
	}
	h := blobHash(data)
	if int64(len(data)) == e.Size || mode == filemode.Symlink {
		s.blobs.put(k, h)
	}
	return h, nil
}

// blobHash is git's id of a blob holding data.
func blobHash(data []byte) plumbing.Hash {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// ignoreMatcher reads the ignore rules of the working tree: every
// .gitignore in it (each for its directory) and .git/info/exclude.
func (s *Service) ignoreMatcher(ctx context.Context, fs *vfs.FS, ents []vfs.WalkEntry, rp *repo) gitignore.Matcher {
	var ps []gitignore.Pattern
	if rp != nil {
		if f, err := rp.dot.Open("info/exclude"); err == nil {
			a, _ := rp.dot.lookup(rp.dot.abs("info/exclude"))
			b := make([]byte, min(a.Size, 1<<20))
			n, _ := f.ReadAt(b, 0)
			ps = append(ps, parseIgnore(string(b[:n]), nil)...)
		}
	}
	for _, e := range ents {
		if path.Base(e.Path) != ".gitignore" || e.Mode&vfs.ModeType != vfs.ModeRegular || e.Size > 1<<20 {
			continue
		}
		b, err := fs.ReadInode(ctx, e.Ino, 1<<20)
		if err != nil {
			continue
		}
		var domain []string
		if d := trimSlash(path.Dir(e.Path)); d != "" {
			domain = strings.Split(d, "/")
		}
		ps = append(ps, parseIgnore(string(b), domain)...)
	}
	return gitignore.NewMatcher(ps)
}

func parseIgnore(text string, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(l, domain))
	}
	return ps
}
