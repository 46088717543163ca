package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// Mode bits (agentfs-spec.md).
const (
	ModeType    = 0o170000
	ModeRegular = 0o100000
	ModeDir     = 0o040000
	ModeSymlink = 0o120000
	ModePerm    = 0o7777
)

// RootIno is the inode number of every session's root directory.
const RootIno int64 = 1

// Defaults for Config.
const (
	DefaultMaxFileSize  int64 = 50 << 20
	DefaultSessionQuota int64 = 1 << 30
	DefaultChunkSize          = 64 << 10
	// DefaultMaxInodes is only what Statfs reports as the inode total; the
	// quota bounds bytes, not the number of files.
	DefaultMaxInodes int64 = 1 << 20
)

// Config holds the VFS limits and collaborators. Zero values take the defaults.
type Config struct {
	MaxFileSize  int64 // per file, bytes
	SessionQuota int64 // per session, bytes of file content
	ChunkSize    int   // for sessions initialised by this VFS
	Notifier     Notifier
	// ReadDB, when set, serves reads that need no transaction (the store's
	// read-only pool); writes and transactions use the db given to New.
	ReadDB *sql.DB
	// BatchDelay is how long a batch of changes stays open for more
	// before it commits (group commit, batch.go); negative: every change
	// commits alone. BatchOps is how many changes a batch holds at most.
	BatchDelay time.Duration
	BatchOps   int
	Logger     *slog.Logger
	Now        func() time.Time
}

// VFS is the session filesystem over one SQLite database.
type VFS struct {
	db  *sql.DB        // writer; the store keeps one connection, so never use it inside a tx
	r   settlingReader // read pool (the writer when Config.ReadDB is nil), after settling
	rq  *reader        // the same without settling: for reads that settled for what they read
	wc  *stmtCache
	cfg Config
	b   batch // group commit

	inval atomic.Pointer[Invalidator]

	mu       sync.Mutex
	sessions map[string]*sessionState

	chains sync.Map // workspace id -> []chainLevel (fork.go)
	views  sync.Map // workspace id -> baseView, zero when not a lazy base (forklazy.go)
}

// sessionState is the in-memory state of one session: its chunk size once
// known and the open counts the FUSE mounts hold. Guarded by VFS.mu.
type sessionState struct {
	chunk  int
	open   map[int64]int
	orphan map[int64]bool // open inodes whose last name went (maybe rolled back)
	// inode numbers reserved by ReserveIno: [resNext, resEnd) are already
	// below fs_meta.next_ino and given to no inode yet
	resNext, resEnd int64
	dirs            map[int64]dirLink // directory cache (paths.go)
	dirGen          uint64            // bumped whenever dirs is cleared by a rename
	// lazy: the workspace's lazy-fork state once known (forklazy.go); nil
	// for any other workspace
	lazyKnown bool
	lazy      *lazyState
}

// New returns a VFS over db, which must already have migration 0002 applied.
func New(db *sql.DB, cfg Config) *VFS {
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.SessionQuota <= 0 {
		cfg.SessionQuota = DefaultSessionQuota
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchDelay == 0 {
		cfg.BatchDelay = DefaultBatchDelay
	}
	if cfg.BatchOps <= 0 {
		cfg.BatchOps = DefaultBatchOps
	}
	rdb := cfg.ReadDB
	if rdb == nil {
		rdb = db
	}
	wc := newStmtCache(db, false)
	rc := wc
	if rdb != db {
		rc = newStmtCache(rdb, true)
	}
	v := &VFS{db: db, rq: &reader{db: rdb, c: rc}, wc: wc, cfg: cfg, sessions: map[string]*sessionState{}}
	v.r = settlingReader{reader: v.rq, v: v}
	return v
}

// Config returns the effective configuration.
func (v *VFS) Config() Config { return v.cfg }

// DB returns the underlying database.
func (v *VFS) DB() *sql.DB { return v.db }

// FS is one session's filesystem, optionally restricted to a node's allowed paths.
type FS struct {
	v       *VFS
	sid     string
	nodeID  string
	allowed []string // cleaned prefixes; nil means the whole workspace
	uid     uint32   // owner of new inodes
	gid     uint32
	// pinned: inodes kept when they lose their last name, for the one
	// transaction of a merge that names them again (Merge).
	pinned map[int64]bool
}

// Session returns the filesystem of a session. It is cheap; the root is
// created on first use.
func (v *VFS) Session(sessionID string) *FS { return &FS{v: v, sid: sessionID} }

// ForNode returns a view of fs restricted to the allowed path prefixes for a
// node (nil or empty: the whole workspace). Violations are denied with EACCES,
// logged at WARN and recorded in the audit log.
func (fs *FS) ForNode(nodeID string, allowed []string) (*FS, error) {
	c := *fs
	c.nodeID = nodeID
	c.allowed = nil
	for _, a := range allowed {
		p, err := paths.CleanPath(a)
		if err != nil {
			return nil, fmt.Errorf("allowed path %q: %w", a, err)
		}
		if p == "/" {
			c.allowed = nil
			return &c, nil
		}
		c.allowed = append(c.allowed, p)
	}
	return &c, nil
}

// SessionID returns the session this FS belongs to.
func (fs *FS) SessionID() string { return fs.sid }

func (v *VFS) state(sid string) *sessionState {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.sessions[sid]
	if st == nil {
		st = &sessionState{open: map[int64]int{}, orphan: map[int64]bool{}, dirs: map[int64]dirLink{}}
		v.sessions[sid] = st
	}
	return st
}

// init makes sure the session's meta row and root inode exist and returns the chunk size.
func (fs *FS) init(ctx context.Context) (int, error) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	chunk := st.chunk
	fs.v.mu.Unlock()
	if chunk > 0 {
		return chunk, nil
	}
	var cs int
	err := fs.v.r.QueryRowContext(ctx, `SELECT chunk_size FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&cs)
	if errors.Is(err, sql.ErrNoRows) {
		err = fs.v.tx(ctx, func(tx *txn) error {
			return initSession(ctx, tx, fs.sid, fs.v.cfg.ChunkSize, fs.v.cfg.Now())
		})
		if err != nil {
			return 0, err
		}
		err = fs.v.db.QueryRowContext(ctx, `SELECT chunk_size FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&cs)
	}
	if err != nil {
		return 0, fmt.Errorf("read session meta: %w", err)
	}
	fs.v.mu.Lock()
	st.chunk = cs
	fs.v.mu.Unlock()
	return cs, nil
}

func initSession(ctx context.Context, tx *txn, sid string, chunk int, now time.Time) error {
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM agent_session WHERE id=?`, sid).Scan(&exists); err != nil {
		return fmt.Errorf("look up session: %w", err)
	}
	if exists == 0 {
		return errorf(syscall.ENOENT, "", "session %s not found", sid)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO fs_meta(session_id, next_ino, used_bytes, chunk_size) VALUES(?,2,0,?)`, sid, chunk); err != nil {
		return fmt.Errorf("init session meta: %w", err)
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns)
		VALUES(?,1,?,0,0,0,?,?,?,?,?,?,?)`, sid, ModeDir|0o755, s, s, s, ns, ns, ns, now.UnixNano()); err != nil {
		return fmt.Errorf("init root inode: %w", err)
	}
	return nil
}

// tx runs f as one change: in the open batch (group commit, batch.go), or
// in a transaction of its own when Config.BatchDelay is negative.
func (v *VFS) tx(ctx context.Context, f func(*txn) error) error {
	if v.cfg.BatchDelay >= 0 {
		return v.batched(ctx, f)
	}
	sqlTx, err := v.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &txn{tx: sqlTx, c: v.wc}
	if err := f(t); err != nil {
		_ = sqlTx.Rollback()
		v.wc.prepareWanted(ctx)
		v.recordDenial(ctx, err)
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, f := range t.after {
		f()
	}
	v.invalidate(ctx, t)
	v.wc.prepareWanted(ctx)
	return nil
}

// Close commits the open batch and releases the prepared statements; the
// databases stay open.
func (v *VFS) Close() {
	if err := v.Sync(context.Background(), false); err != nil {
		v.cfg.Logger.Error("vfs: close", "err", err)
	}
	v.wc.close()
	v.r.c.close()
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func splitTime(t time.Time) (int64, int64) { return t.Unix(), int64(t.Nanosecond()) }

func joinTime(s, ns int64) time.Time { return time.Unix(s, ns) }

// Attr is an inode's metadata.
type Attr struct {
	Ino      int64
	Mode     uint32 // type | permissions
	Nlink    uint32
	UID      uint32
	GID      uint32
	Size     int64
	Atime    time.Time
	Mtime    time.Time
	Ctime    time.Time
	Created  time.Time
	Readonly bool
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Mode&ModeType == ModeDir }

// IsRegular reports whether the inode is a regular file.
func (a Attr) IsRegular() bool { return a.Mode&ModeType == ModeRegular }

// IsSymlink reports whether the inode is a symbolic link.
func (a Attr) IsSymlink() bool { return a.Mode&ModeType == ModeSymlink }

// attrCols are the columns scanAttr reads. The link count is a column kept
// by triggers on fs_dentry (migration 0010), not a count per lookup.
const attrCols = `i.ino, i.mode, i.uid, i.gid, i.size, i.atime, i.atime_ns, i.mtime, i.mtime_ns, i.ctime, i.ctime_ns, i.created_ns, i.is_readonly, i.nlink`

type scanner interface{ Scan(dest ...any) error }

func scanAttr(r scanner) (Attr, error) {
	var a Attr
	var as, ans, ms, mns, cs, cns, created, nlink int64
	var ro int
	if err := r.Scan(&a.Ino, &a.Mode, &a.UID, &a.GID, &a.Size, &as, &ans, &ms, &mns, &cs, &cns, &created, &ro, &nlink); err != nil {
		return Attr{}, err
	}
	a.Atime, a.Mtime, a.Ctime, a.Created = joinTime(as, ans), joinTime(ms, mns), joinTime(cs, cns), time.Unix(0, created)
	a.Readonly = ro != 0
	if a.Ino == RootIno && nlink == 0 {
		nlink = 1
	}
	a.Nlink = uint32(nlink)
	return a, nil
}

func (fs *FS) getAttr(ctx context.Context, q querier, ino int64) (Attr, error) {
	a, err := scanAttr(q.QueryRowContext(ctx, `SELECT `+attrCols+` FROM fs_inode i WHERE i.session_id=? AND i.ino=?`, fs.sid, ino))
	if errors.Is(err, sql.ErrNoRows) {
		return Attr{}, errorf(syscall.ENOENT, "", "inode %d not found", ino)
	}
	if err != nil {
		return Attr{}, fmt.Errorf("read inode %d: %w", ino, err)
	}
	return a, nil
}

func (fs *FS) lookup(ctx context.Context, q querier, parent int64, name string) (Attr, error) {
	a, err := scanAttr(q.QueryRowContext(ctx, `SELECT `+attrCols+` FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		WHERE d.session_id=? AND d.parent_ino=? AND d.name=?`, fs.sid, parent, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Attr{}, errorf(syscall.ENOENT, name, "%s not found", name)
	}
	if err != nil {
		return Attr{}, fmt.Errorf("look up %q: %w", name, err)
	}
	return a, nil
}

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
func (fs *FS) newInode(ctx context.Context, tx *txn, ino int64, mode uint32, uid, gid uint32, size int64, now time.Time) (int64, error) {
	if ino == 0 {
		var err error
		if ino, err = fs.allocIno(ctx, tx); err != nil {
			return 0, err
		}
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)`, fs.sid, ino, mode, uid, gid, size, s, s, s, ns, ns, ns, now.UnixNano()); err != nil {
		return 0, fmt.Errorf("insert inode: %w", err)
	}
	return ino, nil
}

func (fs *FS) addDentry(ctx context.Context, tx *txn, parent int64, name string, ino int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, fs.sid, name, parent, ino)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return errorf(syscall.EEXIST, name, "%s already exists", name)
		}
		return fmt.Errorf("insert dentry %q: %w", name, err)
	}
	fs.changedEntry(tx, parent, name)
	fs.changedAttrs(tx, ino) // its link count
	return nil
}

// touch sets mtime and ctime of ino to now.
func (fs *FS) touch(ctx context.Context, tx *txn, ino int64, now time.Time) error {
	s, ns := splitTime(now)
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`, s, ns, s, ns, fs.sid, ino)
	if err != nil {
		return fmt.Errorf("touch inode %d: %w", ino, err)
	}
	fs.changedAttrs(tx, ino)
	return nil
}

func (fs *FS) touchCtime(ctx context.Context, tx *txn, ino int64, now time.Time) error {
	s, ns := splitTime(now)
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`, s, ns, fs.sid, ino)
	if err != nil {
		return fmt.Errorf("touch inode %d: %w", ino, err)
	}
	fs.changedAttrs(tx, ino)
	return nil
}

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

func (fs *FS) checkFileSize(size int64, p string) error {
	if size > fs.v.cfg.MaxFileSize {
		return errorf(syscall.EFBIG, p, "file exceeds the %s per-file limit", humanBytes(fs.v.cfg.MaxFileSize))
	}
	return nil
}

// removeInodeIfUnlinked deletes ino when no dentry refers to it and no mount has it
// open; an open inode is recorded as an orphan instead.
func (fs *FS) removeInodeIfUnlinked(ctx context.Context, tx *txn, ino int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT nlink FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return fmt.Errorf("count links: %w", err)
	}
	if n > 0 || fs.pinned[ino] {
		return nil
	}
	if fs.v.keepIfOpen(fs.sid, ino) {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO fs_orphan(session_id, ino) VALUES(?,?)`, fs.sid, ino); err != nil {
			return fmt.Errorf("record orphan: %w", err)
		}
		return nil
	}
	return fs.deleteInode(ctx, tx, ino)
}

func (fs *FS) deleteInode(ctx context.Context, tx *txn, ino int64) error {
	var mode uint32
	var size int64
	err := tx.QueryRowContext(ctx, `DELETE FROM fs_inode WHERE session_id=? AND ino=? RETURNING mode, size`, fs.sid, ino).Scan(&mode, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete inode %d: %w", ino, err)
	}
	for _, q := range []string{
		`DELETE FROM fs_data WHERE session_id=? AND ino=?`,
		`DELETE FROM fs_symlink WHERE session_id=? AND ino=?`,
		`DELETE FROM fs_orphan WHERE session_id=? AND ino=?`,
	} {
		if _, err := tx.ExecContext(ctx, q, fs.sid, ino); err != nil {
			return fmt.Errorf("delete inode %d: %w", ino, err)
		}
	}
	if mode&ModeType == ModeRegular {
		return fs.addUsage(ctx, tx, -size)
	}
	return nil
}

// keepIfOpen reports whether ino is open and, if so, notes it as an orphan
// candidate in the same critical section, so that its last Release (which
// takes the same lock) cannot miss it.
func (v *VFS) keepIfOpen(sid string, ino int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.sessions[sid]
	if st == nil || st.open[ino] <= 0 {
		return false
	}
	st.orphan[ino] = true
	return true
}

// Open records that the mount holds ino open: unlinking its last name keeps
// the inode (an orphan) until the matching Release.
func (fs *FS) Open(ino int64) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	st.open[ino]++
	fs.v.mu.Unlock()
}

// Release ends one Open of ino; the last Release of an orphan deletes it.
func (fs *FS) Release(ctx context.Context, ino int64) error {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	st.open[ino]--
	last := st.open[ino] <= 0
	orphan := false
	if last {
		delete(st.open, ino)
		orphan = st.orphan[ino]
		delete(st.orphan, ino)
	}
	fs.v.mu.Unlock()
	if !orphan {
		return nil // the common close: no transaction
	}
	return fs.v.tx(ctx, func(tx *txn) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_orphan WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&n); err != nil {
			return fmt.Errorf("look up orphan: %w", err)
		}
		if n == 0 {
			return nil
		}
		return fs.removeInodeIfUnlinked(ctx, tx, ino)
	})
}

// PurgeOrphans deletes every orphan inode left by a previous run (all
// sessions). Call it at start, before any mount opens files.
func (v *VFS) PurgeOrphans(ctx context.Context) (int, error) {
	rows, err := v.db.QueryContext(ctx, `SELECT session_id, ino FROM fs_orphan`)
	if err != nil {
		return 0, fmt.Errorf("list orphans: %w", err)
	}
	type orphan struct {
		sid string
		ino int64
	}
	var list []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.sid, &o.ino); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list orphans: %w", err)
		}
		list = append(list, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list orphans: %w", err)
	}
	for _, o := range list {
		fs := v.Session(o.sid)
		if err := v.tx(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM fs_orphan WHERE session_id=? AND ino=?`, o.sid, o.ino); err != nil {
				return err
			}
			return fs.removeInodeIfUnlinked(ctx, tx, o.ino)
		}); err != nil {
			return 0, fmt.Errorf("purge orphan %d of session %s: %w", o.ino, o.sid, err)
		}
	}
	return len(list), nil
}
