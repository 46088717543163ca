package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Check verifies the agentfs consistency rules for one session, plus this
// package's own invariants, and returns every violation found (nil when
// consistent). Rule 8 allows orphans (open unlinked inodes) listed in fs_orphan.
func (v *VFS) Check(ctx context.Context, sessionID string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	count := func(q string, args ...any) int64 {
		var n int64
		if err := v.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			bad("query %q: %v", q, err)
		}
		return n
	}
	sid := sessionID
	// a layered fork and a base's view are checked through their levels
	if lv, layered, err := v.Session(sid).levels(ctx, v.r); err != nil {
		return err
	} else if layered {
		return v.checkLayered(ctx, sid, lv)
	}
	// 1. root exists and is a directory
	if n := count(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND ino=1 AND mode & 61440 = 16384`, sid); n != 1 {
		bad("rule 1: root inode 1 missing or not a directory")
	}
	// 2. every dentry references a valid inode
	if n := count(`SELECT COUNT(*) FROM fs_dentry d WHERE d.session_id=? AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=d.session_id AND i.ino=d.ino)`, sid); n > 0 {
		bad("rule 2: %d dentries reference a missing inode", n)
	}
	// 3. every dentry references a valid parent directory
	if n := count(`SELECT COUNT(*) FROM fs_dentry d WHERE d.session_id=? AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=d.session_id AND i.ino=d.parent_ino AND i.mode & 61440 = 16384)`, sid); n > 0 {
		bad("rule 3: %d dentries reference a missing or non-directory parent", n)
	}
	// 4. no duplicate names
	if n := count(`SELECT COUNT(*) FROM (SELECT 1 FROM fs_dentry WHERE session_id=? GROUP BY parent_ino, name HAVING COUNT(*) > 1) AS dup`, sid); n > 0 {
		bad("rule 4: %d duplicate names", n)
	}
	// 5/6. every inode is a directory, regular file or symlink (agentfs),
	// or a special file (this package: a FIFO, socket or device)
	if n := count(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND (mode & 61440) NOT IN (16384, 32768, 40960, 4096, 49152, 8192, 24576)`, sid); n > 0 {
		bad("rules 5/6: %d inodes with an unknown type", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND rdev != 0 AND (mode & 61440) NOT IN (8192, 24576)`, sid); n > 0 {
		bad("%d inodes with a device number that are not devices", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND size != 0 AND (mode & 61440) IN (4096, 49152, 8192, 24576)`, sid); n > 0 {
		bad("%d special files with a size", n)
	}
	// 7. regular file size = sum of chunk sizes; chunk layout; only regular
	// files have data. A fork shares its chunks (doc.go, "Forks"): its rule
	// is that every chunk a file needs is found through its chain.
	ch, err := v.Session(sid).chain(ctx, v.r)
	if err != nil {
		bad("fork chain: %v", err)
	}
	if len(ch) > 0 {
		if err := v.checkForkData(ctx, sid, ch, nil); err != nil {
			bad("rule 7: %v", err)
		}
	} else if n := count(`SELECT COUNT(*) FROM fs_inode i WHERE i.session_id=? AND i.size != COALESCE((SELECT SUM(size) FROM fs_data d WHERE d.session_id=i.session_id AND d.ino=i.ino), 0) AND i.mode & 61440 = 32768`, sid); n > 0 {
		bad("rule 7: %d files whose size differs from their chunks", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_data d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino WHERE d.session_id=? AND i.mode & 61440 != 32768`, sid); n > 0 {
		bad("rule 7: %d data chunks belong to a directory or symlink", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_data d WHERE d.session_id=? AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=d.session_id AND i.ino=d.ino)`, sid); len(ch) == 0 && n > 0 {
		bad("rule 7: %d data chunks of missing inodes", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_data d JOIN fs_meta m ON m.session_id=d.session_id JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		WHERE d.session_id=? AND (d.size != length(d.data) OR d.offset % m.chunk_size != 0 OR d.size != CASE WHEN m.chunk_size < i.size - d.offset THEN m.chunk_size ELSE i.size - d.offset END OR d.size <= 0)`, sid); len(ch) == 0 && n > 0 {
		bad("chunks: %d chunks break the fixed-size layout", n)
	}
	// 8. every inode but the root has a dentry (or is an open orphan)
	if n := count(`SELECT COUNT(*) FROM fs_inode i WHERE i.session_id=? AND i.ino != 1
		AND NOT EXISTS (SELECT 1 FROM fs_dentry d WHERE d.session_id=i.session_id AND d.ino=i.ino)
		AND NOT EXISTS (SELECT 1 FROM fs_orphan o WHERE o.session_id=i.session_id AND o.ino=i.ino)`, sid); n > 0 {
		bad("rule 8: %d inodes without a dentry", n)
	}
	// extensions
	if n := count(`SELECT COUNT(*) FROM fs_dentry WHERE session_id=? AND ino=1`, sid); n > 0 {
		bad("root has a dentry")
	}
	if n := count(`SELECT COUNT(*) FROM (SELECT d.ino FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino WHERE d.session_id=? AND i.mode & 61440 = 16384 GROUP BY d.ino HAVING COUNT(*) > 1) AS dup`, sid); n > 0 {
		bad("%d directories with more than one name", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_inode i WHERE i.session_id=? AND (i.mode & 61440 = 40960) != EXISTS (SELECT 1 FROM fs_symlink s WHERE s.session_id=i.session_id AND s.ino=i.ino)`, sid); n > 0 {
		bad("%d inodes whose symlink row does not match their type", n)
	}
	if n := count(`SELECT COUNT(*) FROM fs_meta m WHERE m.session_id=? AND m.used_bytes != COALESCE((SELECT SUM(size) FROM fs_inode i WHERE i.session_id=m.session_id AND i.mode & 61440 = 32768), 0)`, sid); n > 0 {
		bad("quota: used_bytes differs from the sum of file sizes")
	}
	if n := count(`SELECT COUNT(*) FROM fs_meta m WHERE m.session_id=? AND m.next_ino <= (SELECT MAX(ino) FROM fs_inode i WHERE i.session_id=m.session_id)`, sid); n > 0 {
		bad("next_ino is not above every inode number")
	}
	// the link count column: names, and for a directory its
	// subdirectories (migration 0030)
	if n := count(`SELECT COUNT(*) FROM fs_inode i WHERE i.session_id=? AND i.nlink != (SELECT COUNT(*) FROM fs_dentry d WHERE d.session_id=i.session_id AND d.ino=i.ino)
		+ CASE WHEN i.mode & 61440 = 16384 THEN (SELECT COUNT(*) FROM fs_dentry d JOIN fs_inode c ON c.session_id=d.session_id AND c.ino=d.ino
			WHERE d.session_id=i.session_id AND d.parent_ino=i.ino AND c.mode & 61440 = 16384) ELSE 0 END`, sid); n > 0 {
		bad("nlink: %d inodes whose link count differs from their names (and subdirectories)", n)
	}
	// every directory reaches the root (no cycles, no detached subtrees);
	// CROSS JOIN keeps reach the outer loop, so that each step is an index
	// search (a scan of the session's names per step is quadratic)
	if n := count(`WITH RECURSIVE reach(ino) AS (SELECT CAST(1 AS BIGINT) UNION SELECT d.ino FROM reach r CROSS JOIN fs_dentry d WHERE d.session_id=? AND d.parent_ino=r.ino)
		SELECT COUNT(*) FROM fs_dentry d WHERE d.session_id=? AND d.ino NOT IN (SELECT ino FROM reach)`, sid, sid); n > 0 {
		bad("%d dentries not reachable from the root", n)
	}
	return errors.Join(errs...)
}

// checkLayered is Check for a layered fork or a base's view: the rules on
// names, inodes, link counts, reachability, the quota and the data chain,
// applied to what it reads through its levels.
func (v *VFS) checkLayered(ctx context.Context, sid string, lv []mlevel) error {
	tx, err := v.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	t, err := loadLayered(ctx, tx, lv)
	if err != nil {
		return err
	}
	var meta int64
	var orphans int
	merr := tx.QueryRowContext(ctx, `SELECT used_bytes, (SELECT COUNT(*) FROM fs_orphan WHERE session_id=?1) FROM fs_meta WHERE session_id=?1`, sid).Scan(&meta, &orphans)
	_ = tx.Rollback() // checkForkData reads in a transaction of its own
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r, ok := t.inodes[RootIno]; !ok || !r.IsDir() {
		bad("rule 1: root inode 1 missing or not a directory")
	}
	if t.dangling > 0 {
		bad("rule 2: %d names of missing inodes", t.dangling)
	}
	names := map[int64]int64{}
	subdirs := map[int64]int64{} // of each directory (its link count counts them)
	kids := map[int64][]int64{}
	for k, ino := range t.names {
		if p, ok := t.inodes[k.parent]; !ok || !p.IsDir() {
			bad("rule 3: %q in missing or non-directory %d", k.name, k.parent)
		}
		if ino == RootIno {
			bad("root has a dentry")
		}
		names[ino]++
		kids[k.parent] = append(kids[k.parent], ino)
		if c, ok := t.inodes[ino]; ok && c.IsDir() {
			subdirs[k.parent]++
		}
	}
	var files []regularFile
	var used int64
	for ino, a := range t.inodes {
		switch a.Mode & ModeType {
		case ModeDir, ModeRegular, ModeSymlink, ModeFIFO, ModeSocket, ModeCharDev, ModeBlkDev:
		default:
			bad("rules 5/6: inode %d has an unknown type", ino)
		}
		if want := linkCount(ino, a.Mode, names[ino]+subdirs[ino]); a.Nlink != want {
			bad("nlink: inode %d has %d names and %d subdirectories, link count %d (want %d)", ino, names[ino], subdirs[ino], a.Nlink, want)
		}
		if a.IsDir() && names[ino] > 1 {
			bad("directory %d has %d names", ino, names[ino])
		}
		if _, ok := t.symlinks[ino]; ok != a.IsSymlink() {
			bad("inode %d: its symlink row does not match its type", ino)
		}
		if a.IsRegular() {
			files = append(files, regularFile{ino: ino, size: a.Size})
			used += a.Size
		}
	}
	reach := map[int64]bool{RootIno: true}
	for queue := []int64{RootIno}; len(queue) > 0; queue = queue[1:] {
		for _, c := range kids[queue[0]] {
			if !reach[c] {
				reach[c] = true
				queue = append(queue, c)
			}
		}
	}
	for ino := range t.inodes {
		if !reach[ino] {
			bad("inode %d not reachable from the root", ino)
		}
	}
	if lv[0].kind == lvOwn {
		if merr != nil {
			bad("read meta: %v", merr)
		} else if orphans == 0 && meta != used {
			bad("quota: used_bytes %d differs from the sum of file sizes %d", meta, used)
		}
		ch, err := v.Session(sid).chain(ctx, v.r)
		if err != nil {
			bad("fork chain: %v", err)
		} else if err := v.checkForkData(ctx, sid, ch, files); err != nil {
			bad("rule 7: %v", err)
		}
	}
	return errors.Join(errs...)
}
