package vfs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// The limits on file content: a file's size and the session's quota
// (fs_meta.used_bytes counts every regular file's size once).

// addUsage adds delta bytes to the session's usage, enforcing the quota for growth.
func (fs *FS) addUsage(ctx context.Context, tx *txn, delta int64) error {
	if delta == 0 {
		return nil
	}
	var used int64
	if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET used_bytes=used_bytes+? WHERE session_id=? RETURNING used_bytes`, delta, fs.sid).Scan(&used); err != nil {
		return fmt.Errorf("update usage: %w", err)
	}
	if delta > 0 && used > fs.v.cfg.SessionQuota {
		return errorf(syscall.ENOSPC, "", "session quota of %s exceeded", humanBytes(fs.v.cfg.SessionQuota))
	}
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkFileSize refuses a file of size bytes past the largest file
// (Config.MaxFileSize) with EFBIG; p, when known, is named.
func (fs *FS) checkFileSize(size int64, p string) error {
	if size <= fs.v.cfg.MaxFileSize {
		return nil
	}
	if p != "" {
		return errorf(syscall.EFBIG, p, "%s (%s) exceeds the %s per-file limit", paths.Trunc(p), humanBytes(size), humanBytes(fs.v.cfg.MaxFileSize))
	}
	return errorf(syscall.EFBIG, p, "file exceeds the %s per-file limit", humanBytes(fs.v.cfg.MaxFileSize))
}
