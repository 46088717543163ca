package vfs

import (
	"context"
	"database/sql"
	"fmt"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// Bounds of one transaction of ImportTree: it commits after this many
// entries or bytes of file content, whichever comes first.
const (
	importBatchEntries = 4096
	importBatchBytes   = 64 << 20
)

// ImportTree copies the host directory tree at hostDir into directory p of
// the session, which must be empty: a checkout with its .git, made on the
// host (the runner's clone), in a few large transactions instead of a
// create and writes per file through a mount. Each entry keeps its type,
// permission bits (executable bits too), owner, access and modification
// times; symlinks are copied as links (never followed), names of one host
// inode as hard links of one inode, FIFOs and sockets as special files.
// Every entry's change time is the import's, as a copy's is. The limits
// apply (the largest file, the session quota, the node's allowed paths);
// on an error nothing is left of it. It returns the attributes each path (relative to
// hostDir, "a/b") got, for what must match them (a git index's stat data).
// The change is reported as one file event per entry made in p.
func (fs *FS) ImportTree(ctx context.Context, p, hostDir string) (map[string]Attr, error) {
	return fs.importTree(ctx, p, hostDir, importBatchEntries, importBatchBytes)
}

// importTree is ImportTree with the bounds of one transaction.
func (fs *FS) importTree(ctx context.Context, p, hostDir string, maxEntries int, maxBytes int64) (map[string]Attr, error) {
	p, err := fs.cleanFor(ctx, "import", p, true)
	if err != nil {
		return nil, err
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return nil, err
	}
	r, err := fs.resolveRead(ctx, p, true)
	if err != nil {
		return nil, err
	}
	if !r.exists {
		return nil, notFound(p)
	}
	if !r.attr.IsDir() {
		return nil, errorf(syscall.ENOTDIR, p, "%s is not a directory", p)
	}
	if err := fs.checkEmpty(ctx, fs.v.r, r.attr.Ino, p); err != nil {
		return nil, err
	}
	im := &treeImport{fs: fs, cs: cs, top: r.attr.Ino, topPath: r.path, now: fs.v.cfg.Now(),
		dirs: map[string]int64{".": r.attr.Ino}, links: map[fileID]int64{}, inos: map[string]int64{}}
	// The walk lists the tree first (names, types, sizes), in parents-first
	// order; each transaction then reads the content of its own files.
	var todo []importEntry
	err = filepath.WalkDir(hostDir, func(hp string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if hp == hostDir {
			return nil
		}
		rel, err := filepath.Rel(hostDir, hp)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := paths.ValidName(d.Name()); err != nil {
			return err
		}
		todo = append(todo, importEntry{rel: filepath.ToSlash(rel), host: hp, info: info})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", hostDir, err)
	}
	for len(todo) > 0 {
		n, bytes := 0, int64(0)
		for n < len(todo) && n < maxEntries && bytes < maxBytes {
			if todo[n].info.Mode().IsRegular() {
				bytes += todo[n].info.Size()
			}
			n++
		}
		if err := im.batch(ctx, todo[:n]); err != nil {
			if uerr := im.undo(ctx); uerr != nil {
				return nil, fmt.Errorf("%w (and removing what was imported: %v)", err, uerr)
			}
			return nil, err
		}
		todo = todo[n:]
	}
	for _, ev := range im.evs {
		fs.notify(ev)
	}
	return im.attrs(ctx)
}

// importEntry is one path of a host tree to import.
type importEntry struct {
	rel    string // relative to the tree's root, with "/"
	host   string
	info   os.FileInfo
	data   []byte // a regular file's content, read before its transaction
	target string // a symlink's
}

// fileID is a host inode, to keep hard links.
type fileID struct{ dev, ino uint64 }

// treeImport is the state of one ImportTree across its transactions.
type treeImport struct {
	fs      *FS
	cs      int
	top     int64 // the directory imported into
	topPath string
	now     time.Time
	dirs    map[string]int64 // relative path of each directory made → inode
	links   map[fileID]int64 // host inode of a file with several names → inode
	inos    map[string]int64 // relative path of each entry made → inode
	evs     []event
}

// batch makes the entries es (parents before children) in one transaction.
func (im *treeImport) batch(ctx context.Context, es []importEntry) error {
	fs := im.fs
	cs, cns := splitTime(im.now)
	// The host's files are read before the transaction, which holds the
	// write connection (LOCKS.md) only for the inserts.
	for i := range es {
		e := &es[i]
		switch {
		case e.info.Mode().IsRegular():
			if err := fs.checkFileSize(e.info.Size(), paths.Join(im.topPath, e.rel)); err != nil {
				return err
			}
			b, err := os.ReadFile(e.host)
			if err != nil {
				return fmt.Errorf("import %s: %w", e.rel, err)
			}
			if int64(len(b)) != e.info.Size() {
				return fmt.Errorf("import %s: it changed while it was imported", e.rel)
			}
			e.data = b
		case e.info.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(e.host)
			if err != nil {
				return fmt.Errorf("import %s: %w", e.rel, err)
			}
			e.target = t
		}
	}
	defer func() {
		for i := range es {
			es[i].data = nil
		}
	}()
	// what a transaction that rolls back made must not stay: note it
	// here, keep it after the commit
	made := map[string]int64{}
	newDirs := map[string]int64{}
	newLinks := map[fileID]int64{}
	var evs []event
	err := fs.v.tx(ctx, func(tx *txn) error {
		clear(made)
		clear(newDirs)
		clear(newLinks)
		evs = evs[:0]
		// a layered fork's directory has its own row before names go in
		// it (the link-count triggers update own rows)
		if err := fs.ownIno(ctx, tx, im.top); err != nil {
			return err
		}
		var next int64
		if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET next_ino=next_ino+?1 WHERE session_id=?2 RETURNING next_ino-?1`, len(es), fs.sid).Scan(&next); err != nil {
			return fmt.Errorf("import: allocate inodes: %w", err)
		}
		ins := map[string]*sql.Stmt{}
		for k, q := range map[string]string{
			"inode": `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, data_gen)
				VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			// a layered fork's whiteout may hold the name: it goes
			"name": `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)
				ON CONFLICT(session_id, parent_ino, name) DO UPDATE SET ino=excluded.ino`,
			"data":    `INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?,?,?,?,?)`,
			"symlink": `INSERT INTO fs_symlink(session_id, ino, target) VALUES(?,?,?)`,
		} {
			st, err := tx.tx.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			defer st.Close()
			ins[k] = st
		}
		var used int64
		for _, e := range es {
			dir, name := ".", e.rel
			if i := strings.LastIndexByte(e.rel, '/'); i >= 0 {
				dir, name = e.rel[:i], e.rel[i+1:]
			}
			parent, ok := newDirs[dir]
			if !ok {
				parent, ok = im.dirs[dir]
			}
			if !ok {
				return fmt.Errorf("import: the directory of %s was not imported", e.rel)
			}
			p := paths.Join(im.topPath, e.rel)
			if err := fs.checkPathTx("import", p, true); err != nil {
				return err
			}
			st, _ := e.info.Sys().(*syscall.Stat_t)
			if st == nil {
				return fmt.Errorf("import %s: no stat data", e.host)
			}
			// another name of a host inode already made: a hard link
			id := fileID{uint64(st.Dev), st.Ino}
			if !e.info.IsDir() && st.Nlink > 1 {
				ino, ok := newLinks[id]
				if !ok {
					ino, ok = im.links[id]
				}
				if ok {
					if _, err := ins["name"].ExecContext(ctx, fs.sid, name, parent, ino); err != nil {
						return fmt.Errorf("import %s: %w", e.rel, err)
					}
					made[e.rel] = ino
					continue
				}
			}
			ino := next
			next++
			mode := uint32(st.Mode)
			var size, gen int64
			var target string
			var data []byte
			switch mode & ModeType {
			case ModeRegular:
				size = st.Size
				data, used = e.data, used+size
				if size > 0 {
					gen = 1
				}
			case ModeSymlink:
				target, size = e.target, int64(len(e.target))
			case ModeDir, ModeFIFO, ModeSocket:
			default:
				return errorf(syscall.EINVAL, p, "import %s: a device is not imported", e.rel)
			}
			as, ans := st.Atim.Unix()
			ms, mns := st.Mtim.Unix()
			if _, err := ins["inode"].ExecContext(ctx, fs.sid, ino, mode, st.Uid, st.Gid, size, as, ms, cs, ans, mns, cns, im.now.UnixNano(), gen); err != nil {
				return fmt.Errorf("import %s: %w", e.rel, err)
			}
			if _, err := ins["name"].ExecContext(ctx, fs.sid, name, parent, ino); err != nil {
				return fmt.Errorf("import %s: %w", e.rel, err)
			}
			if target != "" {
				if _, err := ins["symlink"].ExecContext(ctx, fs.sid, ino, target); err != nil {
					return fmt.Errorf("import %s: %w", e.rel, err)
				}
			}
			for off := 0; off < len(data); off += im.cs {
				chunk := data[off:min(off+im.cs, len(data))]
				if _, err := ins["data"].ExecContext(ctx, fs.sid, ino, off, len(chunk), chunk); err != nil {
					return fmt.Errorf("import %s: %w", e.rel, err)
				}
			}
			tx.written += int64(len(data))
			made[e.rel] = ino
			if e.info.IsDir() {
				newDirs[e.rel] = ino
			} else if st.Nlink > 1 {
				newLinks[id] = ino
			}
			if parent == im.top {
				fs.changedEntry(tx, parent, name)
				evs = append(evs, event{op: protocol.FileCreated, path: p, size: size})
			}
		}
		if err := fs.addUsage(ctx, tx, used); err != nil {
			return err
		}
		return fs.touch(ctx, tx, im.top, im.now)
	})
	if err != nil {
		return err
	}
	maps.Copy(im.inos, made)
	maps.Copy(im.dirs, newDirs)
	maps.Copy(im.links, newLinks)
	im.evs = append(im.evs, evs...)
	return nil
}

// undo removes what the transactions before a failed one made: the
// directory imported into is empty again.
func (im *treeImport) undo(ctx context.Context) error {
	if len(im.inos) == 0 {
		return nil
	}
	fs := im.fs
	return fs.v.tx(ctx, func(tx *txn) error {
		kids, err := fs.children(ctx, tx, im.top)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := fs.deleteTree(ctx, tx, im.top, k.name, k.attr); err != nil {
				return err
			}
		}
		return nil
	})
}

// attrs returns the attributes of every entry made, by relative path, read
// after the last transaction (link counts are the triggers').
func (im *treeImport) attrs(ctx context.Context) (map[string]Attr, error) {
	fs := im.fs
	byIno := make(map[int64]Attr, len(im.inos))
	lo := int64(1 << 62)
	for _, ino := range im.inos {
		lo = min(lo, ino)
	}
	rows, err := fs.v.r.QueryContext(ctx, `SELECT `+attrCols+` FROM fs_inode i WHERE i.session_id=? AND i.ino>=?`, fs.sid, lo)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAttr(rows)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		byIno[a.Ino] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	out := make(map[string]Attr, len(im.inos))
	for rel, ino := range im.inos {
		out[rel] = byIno[ino]
	}
	return out, nil
}
