package vfs

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/internal/pgsql"
)

// New inodes and names: inode numbers (allocated in blocks, reserved ahead
// for CreateFile), fs_inode rows and fs_dentry rows.

// allocIno returns the next inode number of the session.
func (fs *FS) allocIno(ctx context.Context, tx *txn) (int64, error) {
	if ino := fs.takeReserved(); ino > 0 {
		return ino, nil
	}
	// Reserve a block: this create takes the first number, the rest are
	// handed out from memory once the transaction has committed.
	var ino int64
	if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET next_ino=next_ino+? WHERE session_id=? RETURNING next_ino-?`, inoBlock, fs.sid, inoBlock).Scan(&ino); err != nil {
		return 0, fmt.Errorf("allocate inode: %w", err)
	}
	tx.onCommit(func() { fs.addReserved(ino+1, ino+inoBlock) })
	return ino, nil
}

// inoBlock is how many inode numbers one fs_meta update reserves. Numbers
// are never reused; reserved numbers lost at a restart are a gap, as the
// agentfs schema allows.
const inoBlock = 64

// takeReserved returns a reserved inode number, or 0 when none is left.
func (fs *FS) takeReserved() int64 {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	defer fs.v.mu.Unlock()
	if st.resNext >= st.resEnd {
		return 0
	}
	ino := st.resNext
	st.resNext++
	return ino
}

// addReserved makes the committed numbers [first, end) available.
func (fs *FS) addReserved(first, end int64) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	defer fs.v.mu.Unlock()
	if st.resNext >= st.resEnd {
		st.resNext, st.resEnd = first, end
	}
}

// dropReserved forgets the session's reserved numbers (after an import
// rewrote fs_meta.next_ino).
func (v *VFS) dropReserved(sid string) {
	st := v.state(sid)
	v.mu.Lock()
	st.resNext, st.resEnd = 0, 0
	v.mu.Unlock()
	v.forgetDirs(sid)
}

// ReserveIno returns an inode number that no other inode of the session
// will get, for CreateFile.
func (fs *FS) ReserveIno(ctx context.Context) (int64, error) {
	if _, err := fs.init(ctx); err != nil {
		return 0, err
	}
	if ino := fs.takeReserved(); ino > 0 {
		return ino, nil
	}
	var ino int64
	err := fs.v.tx(ctx, func(tx *txn) error {
		var err error
		ino, err = fs.allocIno(ctx, tx)
		return err
	})
	return ino, err
}

// newInode inserts an inode with the given mode and returns its number
// (ino, when not 0, is a number from ReserveIno).
func (fs *FS) newInode(ctx context.Context, tx *txn, ino int64, mode uint32, uid, gid uint32, size int64, rdev uint32, now time.Time) (int64, error) {
	if ino == 0 {
		var err error
		if ino, err = fs.allocIno(ctx, tx); err != nil {
			return 0, err
		}
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, rdev)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, fs.sid, ino, mode, uid, gid, size, s, s, s, ns, ns, ns, now.UnixNano(), rdev); err != nil {
		return 0, fmt.Errorf("insert inode: %w", err)
	}
	return ino, nil
}

func (fs *FS) addDentry(ctx context.Context, tx *txn, parent int64, name string, ino int64) error {
	lv, layered, err := fs.levels(ctx, tx)
	if err != nil {
		return err
	}
	if layered {
		// the caller found no entry there: an own row is a whiteout
		return fs.putDentry(ctx, tx, lv, parent, name, ino)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, fs.sid, name, parent, ino)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") || pgsql.Code(err) == "23505" {
			return errorf(syscall.EEXIST, name, "%s already exists", name)
		}
		return fmt.Errorf("insert dentry %q: %w", name, err)
	}
	fs.changedEntry(tx, parent, name)
	fs.changedAttrs(tx, ino) // its link count
	return nil
}
