package treediff

import (
	"sort"
	"strings"
)

// Conflict is a path the fork and the workspace it came from both changed
// since the fork point, to different results.
type Conflict struct {
	Path   string `json:"path"`
	Fork   string `json:"fork" jsonschema:"enum=added,enum=changed,enum=deleted"`   // what the fork did: added | changed | deleted
	Parent string `json:"parent" jsonschema:"enum=added,enum=changed,enum=deleted"` // what the parent did (to the path or a directory above it)
}

// Side is one of the three trees of a merge.
type Side int

// The trees of a merge: the frozen fork point, the fork, the parent (the
// workspace the fork was made from, which the merge writes).
const (
	Base Side = iota
	Fork
	Parent
)

// Same reports whether entry a of tree x and entry b of tree y are the same
// thing: type, permissions, and bytes or target.
type Same func(x Side, a Entry, y Side, b Entry) (bool, error)

// Plan is what a merge does: the fork's changes to apply, in order, and the
// conflicts it leaves.
type Plan struct {
	// Apply: deletions deepest first, then the rest parents first.
	Apply     []FileChange
	Conflicts []Conflict
	// Old: fork inodes from before the fork that the parent still names;
	// the fork's names of one become names of the parent's own (the same
	// number). Write: of those, the ones whose bytes the merge writes
	// (only the fork rewrote them).
	Old   map[int64]bool
	Write map[int64]bool
	// Seed: fork inode -> the parent's inode a name of it already merged
	// names (an earlier merge); its names still to merge link to that.
	Seed map[int64]int64
}

// Merge plans merging fork c into parent p, both forked from base b: dc
// are c's changes since b, dp p's (Changes). A path both changed, to
// different results, is a conflict; a change p already has is neither
// applied nor a conflict (doc.go of orchestrator/vfs, "Forks", gives the
// rules for hard links).
func Merge(b, c, p Tree, dc, dp []FileChange, same Same) (Plan, error) {
	plan := Plan{Conflicts: []Conflict{}, Old: map[int64]bool{}, Write: map[int64]bool{}, Seed: map[int64]int64{}}
	byParent := make(map[string]FileChange, len(dp))
	for _, ch := range dp {
		byParent[ch.Path] = ch
	}
	var err error
	for _, ch := range dc {
		ec, inC := c.Paths[ch.Path]
		ep, inP := p.Paths[ch.Path]
		// the path names an inode from before the fork that the parent
		// still names: did the fork, the parent, change its bytes?
		isOld, forkSame, parentSame, bothSame := false, true, true, true
		if inC && !ec.IsDir() {
			if eb, inB := b.Inodes[ec.Ino]; inB && len(p.Names[ec.Ino]) > 0 {
				isOld = true
				px := p.Inodes[ec.Ino]
				if forkSame, err = same(Base, eb, Fork, ec); err != nil {
					return Plan{}, err
				}
				if parentSame, err = same(Base, eb, Parent, px); err != nil {
					return Plan{}, err
				}
				if !forkSame {
					if bothSame, err = same(Fork, ec, Parent, px); err != nil {
						return Plan{}, err
					}
				}
			}
		}
		if inC == inP {
			merged := !inC
			if inC {
				if merged, err = alreadyMerged(ch.Path, b, ec, c, ep, p, isOld, forkSame || bothSame, plan.Seed, same); err != nil {
					return Plan{}, err
				}
			}
			if merged {
				continue // the parent has it already
			}
		}
		// where both name the same inode from before the fork (a
		// merge made the name before) only its bytes can conflict
		sameName := isOld && inP && ep.Ino == ec.Ino
		if pc, ok := byParent[ch.Path]; ok && !sameName {
			plan.Conflicts = append(plan.Conflicts, Conflict{Path: ch.Path, Fork: ch.Op, Parent: pc.Op})
			continue
		}
		if pop := parentConflict(ch, byParent, p.Paths, dp); pop != "" && !sameName {
			plan.Conflicts = append(plan.Conflicts, Conflict{Path: ch.Path, Fork: ch.Op, Parent: pop})
			continue
		}
		if isOld {
			if !forkSame && !parentSame && !bothSame {
				// the parent rewrote the file this name is of, otherwise
				plan.Conflicts = append(plan.Conflicts, Conflict{Path: ch.Path, Fork: ch.Op, Parent: Changed})
				continue
			}
			plan.Old[ec.Ino] = true
			plan.Write[ec.Ino] = !forkSame && !bothSame
		}
		plan.Apply = append(plan.Apply, ch)
	}
	// deletions deepest first, then the rest parents first
	sort.SliceStable(plan.Apply, func(i, j int) bool {
		di, dj := plan.Apply[i].Op == Deleted, plan.Apply[j].Op == Deleted
		if di != dj {
			return di
		}
		if di {
			return plan.Apply[i].Path > plan.Apply[j].Path
		}
		return plan.Apply[i].Path < plan.Apply[j].Path
	})
	return plan, nil
}

// parentConflict returns what the parent did to a directory above c's path
// (it is no longer a directory there) or below it (c deletes or replaces a
// directory the parent changed something in); "" when neither.
func parentConflict(c FileChange, byParent map[string]FileChange, sp map[string]Entry, dp []FileChange) string {
	for a := parentDir(c.Path); a != "/"; a = parentDir(a) {
		if pc, ok := byParent[a]; ok {
			if e, ok := sp[a]; !ok || !e.IsDir() {
				return pc.Op
			}
		}
	}
	if c.Op == Deleted || c.Kind != "dir" {
		i := sort.Search(len(dp), func(i int) bool { return dp[i].Path > c.Path })
		if i < len(dp) && isUnder(dp[i].Path, c.Path) {
			return dp[i].Op
		}
	}
	return ""
}

// alreadyMerged reports whether the parent has path p (entry ep of sp) as
// the fork has it (ec of sc), hard links included. isOld: ec is an inode
// from before the fork that the parent still names; then p must name it in
// the parent, with bytes the three-way rule keeps (keep). Otherwise the
// parent's inode may not be one from before the fork that the fork has
// under other names, the bytes must be the same, the parent's inode may
// have no name the fork gives another inode, and the names of one fork
// inode that the parent has already must be of one parent inode: the
// first such name (in path order) records it in seed, for the names still
// to merge to link to.
func alreadyMerged(p string, sb Tree, ec Entry, sc Tree, ep Entry, sp Tree, isOld, keep bool, seed map[int64]int64, same Same) (bool, error) {
	if isOld {
		return ep.Ino == ec.Ino && keep, nil
	}
	if _, inB := sb.Inodes[ep.Ino]; inB && len(sc.Names[ep.Ino]) > 0 {
		return false, nil // the parent's is a file the fork has under other names
	}
	s, err := same(Fork, ec, Parent, ep)
	if err != nil || !s {
		return false, err
	}
	for _, q := range sp.Others(p, ep) {
		if e, ok := sc.Paths[q]; ok && e.Ino != ec.Ino {
			return false, nil
		}
	}
	if sc.Linked(ec) {
		if t, ok := seed[ec.Ino]; ok {
			return t == ep.Ino, nil
		}
		seed[ec.Ino] = ep.Ino
	}
	return true, nil
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// isUnder reports whether p is below dir.
func isUnder(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }
