package changes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/revlist"

	"github.com/filepath-dev/filepath/orchestrator"
)

// Branch is a workspace's branch state: what pushing it would send. The
// push (another part of filepath) reads it through Service.Branch.
type Branch struct {
	// Name is HEAD's branch ("" when detached); Head its commit.
	Name string
	Head string
	Base Base
	// Commits are base..HEAD, newest first.
	Commits []Commit
	// Uncommitted: the working tree differs from HEAD (those changes are
	// not in any commit, so a push leaves them behind).
	Uncommitted bool
}

// Branch returns the branch state of workspace t against opt.Base.
func (s *Service) Branch(ctx context.Context, t Target, opt Options) (Branch, error) {
	ch, err := s.Changes(ctx, t, Options{Base: opt.Base, NoText: true})
	if err != nil {
		return Branch{}, err
	}
	if !ch.Repository {
		return Branch{}, orchestrator.Errorf(orchestrator.EInvalid, "the workspace has no git repository")
	}
	return Branch{Name: ch.Branch, Head: ch.Head, Base: ch.Base, Commits: ch.Commits, Uncommitted: len(ch.Uncommitted) > 0}, nil
}

// shipView opens t for a bundle or a patch series: it needs a repository
// with a commit.
func (s *Service) shipView(ctx context.Context, t Target, opt Options) (*view, error) {
	v, err := s.open(ctx, t, opt.Base)
	if err != nil {
		return nil, err
	}
	if v.rp == nil || v.head == nil {
		return nil, orchestrator.Errorf(orchestrator.EInvalid, "the workspace has no git repository with a commit")
	}
	return v, nil
}

// Bundle writes a git bundle (v2) of base..HEAD to w: HEAD and its branch
// as refs, the base commit as the prerequisite (none for base none: the
// bundle then clones), and a pack of the objects HEAD has that the base
// has not. `git clone` or `git fetch` read it.
func (s *Service) Bundle(ctx context.Context, t Target, opt Options, w io.Writer) error {
	v, err := s.shipView(ctx, t, opt)
	if err != nil {
		return err
	}
	var ignore []plumbing.Hash
	bw := bufio.NewWriter(w)
	bw.WriteString("# v2 git bundle\n")
	if v.baseC != nil {
		ignore = append(ignore, v.baseC.Hash)
		subject, _, _ := strings.Cut(v.baseC.Message, "\n")
		fmt.Fprintf(bw, "-%s %s\n", v.baseC.Hash, subject)
	}
	head := v.head.Hash
	if v.branch != "" {
		fmt.Fprintf(bw, "%s refs/heads/%s\n", head, v.branch)
	}
	fmt.Fprintf(bw, "%s HEAD\n\n", head)
	objs, err := revlist.Objects(v.rp.r.Storer, []plumbing.Hash{head}, ignore)
	if err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if _, err := packfile.NewEncoder(bw, v.rp.r.Storer, false).Encode(objs, 0); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	return bw.Flush()
}

// Patches writes base..HEAD as a patch series in git format-patch's mbox
// form (oldest first, merges left out), which `git am` applies.
func (s *Service) Patches(ctx context.Context, t Target, opt Options, w io.Writer) error {
	v, err := s.shipView(ctx, t, opt)
	if err != nil {
		return err
	}
	cs, trunc, err := v.rp.commitsBetween(v.head, v.baseC)
	if err != nil {
		return err
	}
	if trunc {
		return orchestrator.Errorf(orchestrator.ETooLarge, "more than %d commits since the base: download a bundle instead", MaxCommits)
	}
	var series []*object.Commit
	for i := len(cs) - 1; i >= 0; i-- {
		if len(cs[i].ParentHashes) <= 1 {
			series = append(series, cs[i])
		}
	}
	bw := bufio.NewWriter(w)
	rd := reader{ctx: ctx, rp: v.rp, max: MaxFullFile, sizes: s.sizes}
	for i, c := range series {
		if err := ctx.Err(); err != nil {
			return err
		}
		var parent *object.Commit
		if len(c.ParentHashes) == 1 {
			if parent, err = v.rp.r.CommitObject(c.ParentHashes[0]); err != nil {
				return err
			}
		}
		a, err := v.rp.treeOf(parent)
		if err != nil {
			return err
		}
		b, err := v.rp.treeOf(c)
		if err != nil {
			return err
		}
		pairs, err := compare(a, b, func(e entry) ([]byte, error) {
			x, err := rd.content(e)
			if err == errTooLarge {
				return nil, nil
			}
			return x, err
		})
		if err != nil {
			return err
		}
		writePatchHeader(bw, c, i+1, len(series))
		for _, p := range pairs {
			text, err := gitPatch(p, rd)
			if err != nil {
				return err
			}
			bw.WriteString(text)
		}
		bw.WriteString("-- \nfilepath\n\n")
	}
	return bw.Flush()
}

// writePatchHeader writes a commit's mail header and message, as git
// format-patch does.
func writePatchHeader(w *bufio.Writer, c *object.Commit, n, total int) {
	msg := strings.TrimRight(c.Message, "\n")
	subject, body, _ := strings.Cut(msg, "\n")
	body = strings.TrimLeft(body, "\n")
	prefix := "[PATCH]"
	if total > 1 {
		prefix = fmt.Sprintf("[PATCH %d/%d]", n, total)
	}
	fmt.Fprintf(w, "From %s Mon Sep 17 00:00:00 2001\n", c.Hash)
	fmt.Fprintf(w, "From: %s <%s>\n", mime.QEncoding.Encode("utf-8", c.Author.Name), c.Author.Email)
	fmt.Fprintf(w, "Date: %s\n", c.Author.When.Format("Mon, 2 Jan 2006 15:04:05 -0700"))
	fmt.Fprintf(w, "Subject: %s\n", mime.QEncoding.Encode("utf-8", prefix+" "+subject))
	w.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n")
	if body != "" {
		w.WriteString(body)
		w.WriteString("\n")
	}
	w.WriteString("---\n\n")
}
