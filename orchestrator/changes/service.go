package changes

import (
	"context"
	"errors"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// view is one request's reading of a workspace: its repository, HEAD and
// base.
type view struct {
	t      Target
	fs     *vfs.FS
	rp     *repo // nil: no repository
	head   *object.Commit
	branch string
	base   Base
	baseC  *object.Commit // nil: the empty tree (kind none), or no repository
	// idx is the repository's index (nil: none readable), written at idxTime
	idx     *index.Index
	idxTime int64
}

// open reads workspace t's repository and resolves base.
func (s *Service) open(ctx context.Context, t Target, base string) (*view, error) {
	v := &view{t: t, fs: s.files.Session(t.Workspace)}
	rp, err := s.openRepo(ctx, v.fs)
	if err != nil && !errors.Is(err, errNoRepo) {
		return nil, err
	}
	v.rp = rp
	if rp != nil {
		if v.head, v.branch, err = rp.head(); err != nil {
			return nil, err
		}
		v.idx, v.idxTime = rp.readIndex()
		if v.idx != nil {
			// the blobs the index names: their sizes without reading them
			for _, ie := range v.idx.Entries {
				s.sizes.put(ie.Hash, int64(ie.Size))
			}
		}
	}
	kind := base
	if kind == "" {
		switch {
		case t.Fork != nil:
			kind = BaseFork
		default:
			kind = BaseClone
			if c, err := s.bases.BaseCommit(ctx, t.SessionID); err != nil {
				return nil, err
			} else if c == "" {
				kind = BaseNone
			}
		}
	}
	switch kind {
	case BaseNone:
		v.base = Base{Kind: BaseNone}
	case BaseClone:
		c, err := s.bases.BaseCommit(ctx, t.SessionID)
		if err != nil {
			return nil, err
		}
		if c == "" {
			return nil, orchestrator.FieldErrorf("base", "session %s was not cloned from a repository: it has no clone commit", t.SessionID)
		}
		v.base = Base{Kind: BaseClone, Commit: c}
		if rp != nil {
			if v.baseC, err = rp.resolve(c); err != nil {
				return nil, orchestrator.FieldErrorf("base", "the clone commit %s is not in the workspace's repository", c)
			}
		}
	case BaseFork:
		if t.Fork == nil {
			return nil, orchestrator.FieldErrorf("base", "this workspace is not a fork: it has no fork point")
		}
		v.base = Base{Kind: BaseFork}
		if rp != nil {
			brp, err := s.openRepo(ctx, s.files.Session(t.Fork.Base))
			if err != nil && !errors.Is(err, errNoRepo) {
				return nil, err
			}
			if brp != nil {
				if bh, _, err := brp.head(); err != nil {
					return nil, err
				} else if bh != nil {
					v.base.Commit = bh.Hash.String()
					if v.baseC, err = rp.r.CommitObject(bh.Hash); err != nil {
						return nil, err
					}
				}
			}
		}
	default:
		if rp == nil {
			return nil, orchestrator.FieldErrorf("base", "the workspace has no git repository to resolve %q in", kind)
		}
		c, err := rp.resolve(kind)
		if err != nil {
			return nil, err
		}
		v.base = Base{Kind: BaseRef, Ref: kind, Commit: c.Hash.String()}
		v.baseC = c
	}
	return v, nil
}

// section computes the pairs of one section.
func (s *Service) section(ctx context.Context, v *view, section string) ([]pair, error) {
	rd := reader{ctx: ctx, rp: v.rp, max: MaxFullFile, sizes: s.sizes}
	renameContent := func(e entry) ([]byte, error) {
		b, err := rd.content(e)
		if errors.Is(err, errTooLarge) {
			return nil, nil // too large to compare: matched exactly or not at all
		}
		return b, err
	}
	switch section {
	case SectionCommitted:
		if v.rp == nil || (v.head == nil && v.baseC == nil) {
			return nil, nil
		}
		a, err := v.rp.treeOf(v.baseC)
		if err != nil {
			return nil, err
		}
		b, err := v.rp.treeOf(v.head)
		if err != nil {
			return nil, err
		}
		return compare(a, b, renameContent)
	case SectionUncommitted:
		if v.rp == nil {
			if v.t.Fork == nil {
				return nil, nil
			}
			// no repository: the working tree against the fork point's
			cur, err := s.worktree(ctx, v.fs, worktreeOptions{ws: v.t.Workspace})
			if err != nil {
				return nil, err
			}
			hint := map[int64]hinted{}
			for _, e := range cur {
				hint[e.ino] = hinted{hash: e.hash, gen: e.gen}
			}
			base, err := s.worktree(ctx, s.files.Session(v.t.Fork.Base), worktreeOptions{ws: v.t.Fork.Base, hint: hint})
			if err != nil {
				return nil, err
			}
			return compare(base, cur, renameContent)
		}
		cur, err := s.worktree(ctx, v.fs, worktreeOptions{ws: v.t.Workspace, idx: v.idx, idxTime: v.idxTime, ignore: true, rp: v.rp})
		if err != nil {
			return nil, err
		}
		a, err := v.rp.treeOf(v.head)
		if err != nil {
			return nil, err
		}
		return compare(a, cur, renameContent)
	}
	return nil, orchestrator.FieldErrorf("section", "section must be %q or %q, not %q", SectionUncommitted, SectionCommitted, section)
}

// Changes returns workspace t's changes: base..HEAD's commits and diff, and
// the working tree against HEAD.
func (s *Service) Changes(ctx context.Context, t Target, opt Options) (Changes, error) {
	v, err := s.open(ctx, t, opt.Base)
	if err != nil {
		return Changes{}, err
	}
	out := Changes{Repository: v.rp != nil, Base: v.base, Branch: v.branch, Commits: []Commit{}, Committed: []FileDiff{}, Uncommitted: []FileDiff{}}
	if v.head != nil {
		out.Head = v.head.Hash.String()
	}
	if v.rp != nil {
		cs, trunc, err := v.rp.commitsBetween(v.head, v.baseC)
		if err != nil {
			return Changes{}, err
		}
		out.Truncated = trunc
		if out.Commits, err = s.commits(ctx, t, cs); err != nil {
			return Changes{}, err
		}
	}
	budget := MaxPatchTotal
	rd := reader{ctx: ctx, rp: v.rp, max: MaxFullFile, sizes: s.sizes}
	for _, sec := range []string{SectionUncommitted, SectionCommitted} {
		pairs, err := s.section(ctx, v, sec)
		if err != nil {
			return Changes{}, err
		}
		fds := make([]FileDiff, 0, len(pairs))
		for _, p := range pairs {
			fd, err := fileDiff(p, rd, !opt.NoText && budget > 0, MaxPatch)
			if err != nil {
				return Changes{}, err
			}
			budget -= len(fd.Patch)
			fds = append(fds, fd)
		}
		if sec == SectionCommitted {
			out.Committed = fds
		} else {
			out.Uncommitted = fds
		}
	}
	return out, nil
}

// File returns one file's diff of a section, its patch up to MaxFullFile
// per side ("show anyway").
func (s *Service) File(ctx context.Context, t Target, opt Options, section, path string) (FileDiff, error) {
	v, err := s.open(ctx, t, opt.Base)
	if err != nil {
		return FileDiff{}, err
	}
	pairs, err := s.section(ctx, v, section)
	if err != nil {
		return FileDiff{}, err
	}
	path = strings.TrimPrefix(path, "/")
	for _, p := range pairs {
		if p.path() == path {
			return fileDiff(p, reader{ctx: ctx, rp: v.rp, max: MaxFullFile, sizes: s.sizes}, true, 4*MaxFullFile)
		}
	}
	return FileDiff{}, orchestrator.Errorf(orchestrator.ENotFound, "%s has no %s change at %s", t.Workspace, section, path)
}

// commits describes cs, each with the commit event that reported it.
func (s *Service) commits(ctx context.Context, t Target, cs []*object.Commit) ([]Commit, error) {
	out := make([]Commit, 0, len(cs))
	if len(cs) == 0 {
		return out, nil
	}
	recs, err := s.log.CommitRecords(ctx, t.SessionID, "")
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		id := c.Hash.String()
		msg := strings.TrimRight(c.Message, "\n")
		subject, _, _ := strings.Cut(msg, "\n")
		cm := Commit{ID: id, Subject: subject, Message: msg, Author: c.Author.Name, AuthorEmail: c.Author.Email, When: c.Author.When, Parents: []string{}}
		for _, p := range c.ParentHashes {
			cm.Parents = append(cm.Parents, p.String())
		}
		// the latest report of it (an agent may report an abbreviated id)
		for i := len(recs) - 1; i >= 0; i-- {
			r := recs[i]
			if len(r.Hash) >= 7 && strings.HasPrefix(id, strings.ToLower(r.Hash)) {
				cm.Record, cm.Ref, cm.NodeID = r.Seq, r.Ref, r.NodeID
				break
			}
		}
		out = append(out, cm)
	}
	return out, nil
}
