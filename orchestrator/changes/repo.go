package changes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// repo is a workspace's git repository, opened for one request.
type repo struct {
	r   *git.Repository
	st  *filesystem.Storage
	dot *gitFS
}

// openRepo opens the repository whose .git is at the root of workspace
// fs; errNoRepo when there is none.
func (s *Service) openRepo(ctx context.Context, fs *vfs.FS) (*repo, error) {
	dot := newGitFS(ctx, fs, "/.git")
	fi, err := dot.Stat("")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || vfs.IsErrno(err, syscall.ENOENT) {
			return nil, errNoRepo
		}
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errNoRepo // a gitdir file (a linked worktree): not supported
	}
	st := filesystem.NewStorageWithOptions(dot, s.objects, filesystem.Options{KeepDescriptors: false})
	r, err := git.Open(st, nil)
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, errNoRepo
		}
		return nil, fmt.Errorf("open repository: %w", err)
	}
	return &repo{r: r, st: st, dot: dot}, nil
}

// head returns HEAD's commit (nil in a repository without commits) and
// its branch ("" when detached).
func (rp *repo) head() (*object.Commit, string, error) {
	ref, err := rp.r.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		sym, serr := rp.r.Storer.Reference(plumbing.HEAD)
		if serr == nil && sym.Type() == plumbing.SymbolicReference {
			return nil, sym.Target().Short(), nil
		}
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read HEAD: %w", err)
	}
	c, err := rp.r.CommitObject(ref.Hash())
	if err != nil {
		return nil, "", fmt.Errorf("read HEAD's commit %s: %w", ref.Hash(), err)
	}
	branch := ""
	if ref.Name().IsBranch() {
		branch = ref.Name().Short()
	}
	return c, branch, nil
}

// resolve returns the commit a ref names: a branch, a tag, a remote
// branch, or a (full or abbreviated) commit id.
func (rp *repo) resolve(ref string) (*object.Commit, error) {
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n:") {
		return nil, orchestrator.FieldErrorf("base", "%q is not a ref", ref)
	}
	h, err := rp.r.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, orchestrator.FieldErrorf("base", "the repository has no ref or commit %q", ref)
	}
	c, err := rp.r.CommitObject(*h)
	if err != nil {
		return nil, orchestrator.FieldErrorf("base", "%q is not a commit", ref)
	}
	return c, nil
}

// commitsBetween lists base..head (what head has that base has not),
// newest first, at most MaxCommits (truncated: there were more).
func (rp *repo) commitsBetween(head, base *object.Commit) ([]*object.Commit, bool, error) {
	if head == nil {
		return nil, false, nil
	}
	stop := map[plumbing.Hash]bool{}
	if base != nil {
		// what base reaches is left out: its ancestors, up to a bound (an
		// agent's work sits on top of a base, so the walk from head meets
		// them early)
		if err := walkAncestors(rp, base, 50_000, func(c *object.Commit) { stop[c.Hash] = true }); err != nil {
			return nil, false, err
		}
	}
	var out []*object.Commit
	seen := map[plumbing.Hash]bool{head.Hash: true}
	queue := []*object.Commit{head}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if stop[c.Hash] {
			continue
		}
		if len(out) == MaxCommits {
			return out, true, nil
		}
		out = append(out, c)
		for _, p := range c.ParentHashes {
			if seen[p] || stop[p] {
				continue
			}
			seen[p] = true
			pc, err := rp.r.CommitObject(p)
			if err != nil {
				if errors.Is(err, plumbing.ErrObjectNotFound) {
					continue // a shallow clone's boundary
				}
				return nil, false, err
			}
			queue = append(queue, pc)
		}
	}
	// newest first by committer time, as git log shows them
	sortCommits(out)
	return out, false, nil
}

// walkAncestors calls f for c and its ancestors, at most max of them.
func walkAncestors(rp *repo, c *object.Commit, max int, f func(*object.Commit)) error {
	seen := map[plumbing.Hash]bool{c.Hash: true}
	queue := []*object.Commit{c}
	for len(queue) > 0 && len(seen) <= max {
		c := queue[0]
		queue = queue[1:]
		f(c)
		for _, p := range c.ParentHashes {
			if seen[p] {
				continue
			}
			seen[p] = true
			pc, err := rp.r.CommitObject(p)
			if err != nil {
				if errors.Is(err, plumbing.ErrObjectNotFound) {
					continue
				}
				return err
			}
			queue = append(queue, pc)
		}
	}
	return nil
}

func sortCommits(cs []*object.Commit) {
	// insertion sort keeps the walk's order among equal times
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Committer.When.After(cs[j-1].Committer.When); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// entry is one file of a tree: a git tree's blob, or a working-tree file.
type entry struct {
	mode filemode.FileMode
	hash plumbing.Hash
	size int64 // -1: not known yet (a git blob whose size was not read)
	// a working-tree file: its inode in fs (a symlink: its target)
	fs     *vfs.FS
	ino    int64
	gen    int64
	target string
}

// flatTree is a tree by path (no leading slash, git's form).
type flatTree map[string]entry

// treeOf flattens commit c's tree (nil: the empty tree).
func (rp *repo) treeOf(c *object.Commit) (flatTree, error) {
	out := flatTree{}
	if c == nil {
		return out, nil
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	return out, rp.flatten(t, "", out)
}

func (rp *repo) flatten(t *object.Tree, prefix string, out flatTree) error {
	for _, e := range t.Entries {
		p := prefix + e.Name
		if e.Mode == filemode.Dir {
			sub, err := object.GetTree(rp.r.Storer, e.Hash)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", p, err)
			}
			if err := rp.flatten(sub, p+"/", out); err != nil {
				return err
			}
			continue
		}
		out[p] = entry{mode: e.Mode, hash: e.Hash, size: -1}
	}
	return nil
}

// blob reads a git blob (at most max bytes: larger is errTooLarge with
// its size).
func (rp *repo) blob(h plumbing.Hash, max int64) ([]byte, int64, error) {
	o, err := rp.r.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, 0, fmt.Errorf("read blob %s: %w", h, err)
	}
	if o.Size() > max {
		return nil, o.Size(), errTooLarge
	}
	r, err := o.Reader()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	return b, int64(len(b)), err
}

// blobSize reads a git blob's size without its content.
func (rp *repo) blobSize(h plumbing.Hash) (int64, error) {
	return rp.r.Storer.EncodedObjectSize(h)
}

var errTooLarge = errors.New("too large")
