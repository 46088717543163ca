package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
)

// dirLink is one directory in the session's directory cache: its parent,
// its name and the length of its path. The cache holds the directory tree
// as parent links, so that a directory's path length is known without
// walking to the root and its path is built in one allocation: memory and
// work stay proportional to the tree, however deep.
type dirLink struct {
	parent int64
	name   string
	plen   int // len of the directory's path ("/" is 1)
}

// maxDirPaths bounds the per-session directory cache (entries); names are
// at most paths.MaxNameLen bytes, so the cache stays under about 1.2 MB.
const maxDirPaths = 4096

// maxDepth is how many levels a walk to the root goes at most before it
// takes the tree for broken (a cycle, which no call makes). A directory
// may be as deep as anyone makes it: the kernel limits the path a call is
// given (PATH_MAX), not how deep a file lies, and so does this package.
const maxDepth = 1 << 20

// childLen returns the length of the path of name in a directory whose
// path has length plen.
func childLen(plen int, name string) int {
	if plen <= 1 {
		return 1 + len(name)
	}
	return plen + 1 + len(name)
}

// dirCache is the directory cache as one caller may use it. Only a rename
// (and an import) changes the link of an existing directory (inode numbers
// are never reused once committed); it clears the cache in its transaction
// and again at commit (forgetDirPaths), bumping a generation so that a
// read that began before the commit does not fill it with what it read
// then. A write transaction fills its own entries, which join the cache
// only when it commits (a rollback may give its new inode numbers to other
// directories); one that renamed bypasses the cache altogether.
type dirCache struct {
	fs     *FS
	st     *sessionState
	tx     *txn // nil on the read pool
	gen    uint64
	bypass bool
}

func (fs *FS) dirCache(q querier) dirCache {
	st := fs.v.state(fs.sid)
	c := dirCache{fs: fs, st: st}
	if tx, ok := q.(*txn); ok {
		c.tx, c.bypass = tx, tx.noPathCache
	}
	fs.v.mu.Lock()
	c.gen = st.dirGen
	fs.v.mu.Unlock()
	return c
}

func (c *dirCache) get(ino int64) (dirLink, bool) {
	if c.bypass {
		return dirLink{}, false
	}
	if c.tx != nil {
		if l, ok := c.tx.dirs[ino]; ok {
			return l, true
		}
	}
	c.fs.v.mu.Lock()
	l, ok := c.st.dirs[ino]
	c.fs.v.mu.Unlock()
	return l, ok
}

func (c *dirCache) put(ino int64, l dirLink) {
	if c.bypass {
		return
	}
	if c.tx != nil {
		if c.tx.dirs == nil {
			c.tx.dirs = map[int64]dirLink{}
			tx, fs := c.tx, c.fs
			tx.onCommit(func() { fs.addDirLinks(tx) })
		}
		if len(c.tx.dirs) < maxDirPaths {
			c.tx.dirs[ino] = l
		}
		return
	}
	c.fs.v.mu.Lock()
	defer c.fs.v.mu.Unlock()
	if c.st.dirGen != c.gen {
		return
	}
	if len(c.st.dirs) >= maxDirPaths {
		clear(c.st.dirs)
	}
	c.st.dirs[ino] = l
}

// addDirLinks adds a committed transaction's directory links to the cache.
func (fs *FS) addDirLinks(tx *txn) {
	if tx.noPathCache {
		return
	}
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	defer fs.v.mu.Unlock()
	if len(st.dirs)+len(tx.dirs) > maxDirPaths {
		clear(st.dirs)
	}
	for ino, l := range tx.dirs {
		st.dirs[ino] = l
	}
}

// forgetDirPaths empties the session's directory cache; inside a
// transaction it also makes the transaction bypass it (it renames).
func (fs *FS) forgetDirPaths(tx *txn) {
	if tx != nil {
		tx.noPathCache = true
	}
	fs.v.forgetDirs(fs.sid)
}

func (v *VFS) forgetDirs(sid string) {
	st := v.state(sid)
	v.mu.Lock()
	clear(st.dirs)
	st.dirGen++
	v.mu.Unlock()
}

// dirInfo returns the link of directory ino (the root's is {plen: 1}),
// reading the names of the ancestors the cache lacks: one query per
// missing ancestor, none when it is cached.
func (fs *FS) dirInfo(ctx context.Context, q querier, ino int64) (dirLink, error) {
	if ino == RootIno {
		return dirLink{plen: 1}, nil
	}
	c := fs.dirCache(q)
	type step struct {
		ino, parent int64
		name        string
	}
	var missing []step
	base := dirLink{plen: 1}
	for cur := ino; cur != RootIno; {
		if l, ok := c.get(cur); ok {
			base = l
			break
		}
		if len(missing) > maxDepth {
			return dirLink{}, errorf(syscall.ELOOP, "", "directory %d is more than %d levels deep", ino, maxDepth)
		}
		s := step{ino: cur}
		var err error
		s.parent, s.name, err = fs.firstName(ctx, q, cur)
		if errors.Is(err, sql.ErrNoRows) {
			return dirLink{}, errorf(syscall.ENOENT, "", "inode %d has no name", cur)
		}
		if err != nil {
			return dirLink{}, fmt.Errorf("path of inode %d: %w", ino, err)
		}
		missing = append(missing, s)
		cur = s.parent
	}
	l := base
	for i := len(missing) - 1; i >= 0; i-- {
		m := missing[i]
		l = dirLink{parent: m.parent, name: m.name, plen: childLen(l.plen, m.name)}
		c.put(m.ino, l)
	}
	return l, nil
}

// dirPath returns the path of directory ino.
func (fs *FS) dirPath(ctx context.Context, q querier, ino int64) (string, error) {
	l, err := fs.dirInfo(ctx, q, ino)
	if err != nil || ino == RootIno {
		return "/", err
	}
	buf := make([]byte, l.plen)
	pos := len(buf)
	for cur := ino; cur != RootIno; {
		cl, err := fs.dirInfo(ctx, q, cur) // cached by the call above
		if err != nil {
			return "", err
		}
		if pos < len(cl.name)+1 {
			return fs.walkPath(ctx, q, ino) // the cache changed meanwhile
		}
		pos -= len(cl.name)
		copy(buf[pos:], cl.name)
		pos--
		buf[pos] = '/'
		cur = cl.parent
	}
	if pos != 0 {
		return fs.walkPath(ctx, q, ino)
	}
	return string(buf), nil
}
