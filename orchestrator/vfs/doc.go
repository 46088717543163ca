// Package vfs is the session filesystem: the agentfs inode store in SQLite
// (inodes, names, chunked data, group commit, the directory cache,
// copy-on-write forks) with the operations that are transactions of it:
// the inode API the FUSE mount calls (inode*.go), the path API the REST
// layer serves (pathapi.go, grep.go), fork diff and merge (fork*.go,
// diff.go, merge.go), the enforcement of a node's allowed paths and its
// audit (policy.go, audit.go), key-value state and tool calls (state.go),
// file metadata and streamed uploads (filemeta.go, upload.go, ranges.go,
// content.go),
// agentfs export and import (export.go) and Check. It knows nothing of HTTP
// or FUSE.
//
// What needs no transaction of the store lives in packages below it, which
// know nothing of it (internal/layering tests the arrows): paths (the rules
// of session paths, the allowed-paths policy), errno (the error: an errno
// and a code), events (the Coalescer of file events; the change notices a
// mount's cache needs), treediff (comparing a fork's trees: its changes and
// the merge's plan) and textdiff (unified diffs).
//
// The path API, diff and merge stay with the store: each change is one
// transaction that resolves paths, makes and removes inodes and names,
// writes chunks, counts the quota and records invalidations and file
// events, through the same unexported steps the inode API uses (resolve,
// mknod, writeChunks, deleteTree, addUsage, ...). A package of their own
// would need those steps as an exported transaction API, which every user
// of vfs (the mount, the REST layer) could then call around the rules the
// store keeps; what of them is pure (treediff, paths) is outside.
//
// Storage (orchestrator/store/migrations/0002_vfs.sql) follows agentfs-spec.md
// with every table scoped by session_id and inode numbers per session
// (PRIMARY KEY(session_id, ino)); ino 1 is each session's root, created lazily
// on first use. Extensions, each documented in the migration:
//
//   - atime_ns/mtime_ns/ctime_ns hold the sub-second part of each time (git and
//     make compare nanoseconds); created_ns is the creation time. agentfs
//     columns stay in seconds, so an export is a valid agentfs file.
//   - is_readonly (session-vfs.md), sha256 + data_gen (cached content hash,
//     recomputed lazily after inode-level writes).
//   - fs_meta per session: next inode number (never reused), bytes used (the
//     quota counts the size of every regular-file inode once) and the chunk size.
//   - fs_orphan: an inode whose last dentry was removed while a mount's
//     kernel knew it (FS.Open without the matching FS.Release: the mount
//     holds an inode from the kernel's first lookup of it to its FORGET)
//     is kept, listed here, until the last Release; VFS.PurgeOrphans
//     removes leftovers at start.
//     This is the one exception to consistency rule 8.
//   - fs_audit: insert-only security audit (tool_calls columns).
//   - rdev (migration 0030): a device's number. FIFOs, sockets and devices
//     (Mknod) are inodes with their type in mode, as the kernel's st_mode
//     has it; agentfs names only directories, files and symlinks. They have
//     no content: the path API lists and stats them and refuses to read or
//     write one as a file.
//   - fs_file_meta (migration 0050, filemeta.go): a file's MIME type,
//     detected from its bytes and stored with the data_gen it was detected
//     at (a write through the mount makes it stale: detected again on the
//     next read), and its provenance (source upload/created/derived, the
//     node that last wrote it). Keyed by inode: a rename keeps it.
//
// An upload (upload.go) streams into an inode without a name, listed in
// fs_orphan, in transactions of UploadFlush bytes, and takes its name (or
// gives its bytes to the file at its path) in one last transaction: the
// write connection is never held for the whole stream, and a failed or
// interrupted upload leaves nothing (a crash: an orphan PurgeOrphans
// removes). Byte ranges (ranges.go) read through a seekable File and write
// at an offset, an append or a write that ends the file, with If-Match.
//
// File data is stored in fixed-size chunks (Config.ChunkSize, 64 KiB by default,
// see docs/benchmarks/vfs.md): chunk k starts at k*ChunkSize and every chunk but
// the last is full, so a write at an offset rewrites only the chunks it touches.
// Holes are stored as zeros, keeping rule 7 (size = sum of chunk sizes).
//
// Inode numbers are taken from fs_meta.next_ino in blocks of 64 (one
// update per 64 new inodes); numbers reserved but unused when the process
// ends are a gap, never reused. ReserveIno hands one out ahead of time for
// CreateFile, which creates a file with its first data in one transaction.
// A per-session cache of the directory tree
// as parent links (dircache.go), cleared by every rename and import, gives
// event paths without walking to the root.
//
// Path limits are per call, as the kernel's: the path API refuses a path
// it is given longer than paths.MaxPathLen (4096) bytes, and both APIs a
// name longer than paths.MaxNameLen (255); how deep a file lies is not
// bounded (the mount makes deeper files with relative paths, and renames
// move trees below that depth). A change deeper than the path API can
// name is reported (file events) as a change of the deepest directory it
// can. A walk to the root stops at maxDepth levels (a broken tree).
// Grep, copy, delete, move and export do work in proportion to the tree: no
// path is built per entry, and a copied, deleted or newly made directory
// gives one file event, which stands for everything in it.
//
// After each commit the Notifier (Config.Notifier, an events.Coalescer)
// learns the file events of the change, and the Invalidator
// (SetInvalidator) which names and inodes it touched, with the origin its
// context carries (events.WithOrigin): the workspace Fanout turns that into
// FUSE invalidation notices for the session's other mounts, so their
// kernels may cache long.
//
// Every change is one savepoint in a batch of changes that commits a few
// milliseconds later (group commit, batch.go); a change without an origin
// (the REST API) commits before its call returns, and Fsync commits the
// batch with a full sync. Reads see the open batch (they commit it first
// when it changed what they read). The link count is fs_inode.nlink, kept by triggers on
// fs_dentry (migrations 0010, 0030): an inode's names and, for a directory,
// its subdirectories; a directory shows one more (".", and the root its
// own ".."), 2 plus its subdirectories as POSIX has it, and 0 once removed
// (linkCount). A layered fork's own rows count its own names: a directory
// is copied up before a name in it changes, and a whiteout over a base's
// name of a subdirectory takes it off by hand (layers.go).
//
// ImportTree copies a directory tree of the host (the runner's clone of a
// session's repository) into an empty directory in a few large
// transactions, keeping types, modes, times, symlinks and hard links, and
// returns what each path became.
//
// # Forks (fork.go, layers.go, compact.go, partial.go, forkdata.go, diff.go, merge.go, treediff; migrations 0012, 0013, 0035)
//
// A fork is a copy-on-write copy of a workspace. Every workspace, a fork
// too, is keyed by an agent_session id (the fs_* foreign keys), so a fork
// lives under a hidden agent_session row listed in fs_fork; the store's
// session queries leave those rows out and they go when their session, their
// node (agent_node delete trigger) or VFS.DeleteFork removes them.
//
// Forking workspace P makes two workspaces in one transaction: B, the frozen
// fork point (never written), and C, the fork, which the child works on.
// Neither copies a row of a file, then or later: reads go through, like an
// overlay filesystem's layers.
//
//   - B is a view (migration 0013). Its rows are only what P has changed or
//     removed since the fork: triggers on fs_inode, fs_dentry and fs_symlink
//     save a row into every lazy base of P before its first change (names
//     into fs_fork_dentry, keyed by their id in P). Every other row of the
//     view is P's: inodes below base_next_ino (P's next inode number at the
//     fork) and names with an id up to max_dentry (P's highest at the fork).
//   - C is layered (migration 0035): its own rows are exactly what it
//     changed, and a read that finds no own row reads B's view (layers.go:
//     the levels C's own, B's saved, P's as B sees them, and P's own levels
//     when P is a fork). The first level with a row for a name (parent,
//     name) or an inode decides. What C removed of B is marked in its own
//     rows: a whiteout is a name row with ino 0, a tombstone an inode row
//     with mode 0. A whiteout is keyed by its directory's inode, not by a
//     path, so renaming a directory drops one name (a whiteout) and adds
//     one: what is below it stays keyed by the directory's inode. An inode
//     C changes is first copied up, unchanged, into its own rows (ownIno):
//     its number, size, times and generation are those of the fork point,
//     so a child's .git/index stays valid. The link-count triggers count
//     C's own names only: a whiteout over a name of B takes the link off by
//     hand. So a fork's first use of a directory costs nothing but its
//     reads (one statement per lookup or listing over the levels).
//   - A copy-up is the row as C reads it, and C's new names have ids above
//     any fork point's max_dentry: a fork of C (whose base views C) reads
//     the same before and after either.
//   - Forks of forks add two levels each. A base whose origin is a layered
//     fork is compacted in the background (compact.go; CompactForks at
//     once): its saved rows take its whole view and it is marked full, so
//     its view stops there. That changes nothing any read returns, during
//     or after (a saved row is what the view read there anyway), so readers
//     that still walk the old levels stay right.
//
// Forks of migration 0013 that copied a directory whole at its first use
// were made layered by migration 0035 (a whiteout for every name of a
// copied directory the fork no longer has); forks made before migration
// 0013 hold full copies (fs_fork.layered = 0 and a base with lazy = 0) and
// keep working as they are.
//
// Data is shared at chunk level. A read of chunk (ino, off) in a fork takes
// the fork's own row if there is one, else walks up the parent chain while
// ino is below each level's base_next_ino. A fork's own rows appear when it
// writes (a partial write reads the inherited chunk first: chunk-level
// copy-up) and when a parent changes or deletes a chunk a fork still reads
// through it: the triggers fs_data_cow_update and fs_data_cow_delete copy the
// old row, before it changes, into every direct fork that has no row of its
// own at that offset and still has the inode (or has forks of its own, which
// may). A workspace with no forks pays one indexed probe of fs_fork per chunk
// write and nothing else. So a fork's rows may be longer than its file (a
// truncate of an inherited chunk does not copy it) or missing: every read of
// a fork is clipped to the inode's size and goes through the chain
// (readChunks, ReadAt, hashes, copy, grep, export, Check).
//
// Fork of a fork works the same way (its parent is the fork); chains only
// grow by forking. Deleting a fork deletes its workspaces, then those of
// every fork made from it (deepest first, so no copy-up is wasted on them)
// and its frozen base: its own rows and the chunks copied up for it are freed,
// the parent's rows stay.
//
// A fork's changes give no file events (no "file" records in the session
// log, which are the session's workspace): they are its diff.
//
// Diff compares the fork with its frozen base by path, reading only what
// the fork's own rows touch (partial.go): the names at the keys it changed,
// every name of each inode found there (hard links, moves), the
// directories above them and the whole subtree of a directory that is
// another inode at its key on the two sides; so its cost follows the
// changes, not the files. Merge reads the same way the three trees (the
// fork point, the fork, the origin), from the fork's own rows and the
// origin's changes since the fork, which its fork point's view records
// (the names and inodes it saved, what the saved names are now, the
// origin's names made since): O(changes) on both sides. A fork point
// compacted to its whole view (a fork of a fork) no longer tells the
// origin's changes apart: its merge reads the trees whole. Both read
// through cached prepared statements (a read transaction on the read
// pool for Diff).
//
// Statfs reports the workspace: its size the session quota, its free
// space what is left of it (at most what the data directory's disk has
// free, Config.DataDir), its inodes in use a fork's through its fork point
// (the fork point's count, kept once, plus the fork's new inodes, less its
// tombstones).
//
// A diff lists by path: added, deleted, changed (type, mode, symlink target or content;
// content is compared by data_gen first and by sha256 only when that
// differs), with a unified text diff for changed text files. A path that
// names another inode than at the fork point counts as changed only when
// either inode has several names (a hard link made or broken, also with
// the same bytes) or the old inode is still in the fork under another name
// (it moved, and this is a copy); a new inode at a path is otherwise judged
// by what it holds. Hard links stay per path in the diff: each name is listed with
// what a reader of it sees (an added name of an existing file shows its
// whole text as added), and treediff.FileChange.Links gives the file's other paths
// in the fork.
//
// Merge applies the fork's changes to the workspace it was forked from in
// one transaction, except conflicts: paths (or their ancestors) that the
// parent changed too since the fork point with a different result. Conflicts
// are listed and left as they are in the parent; merging again is
// idempotent (a change already in the parent is neither a conflict nor
// reapplied). Fork and parent number new inodes from the same next_ino, so
// a number names the same file on both sides only below base_next_ino, and
// their bytes are compared by hash (both may have written the same inode
// to the same generation). Names that share an inode in the fork share one
// in the parent after the merge, its bytes counted once in the quota:
//
//   - an inode from before the fork that the parent still names (a name
//     added, or a path moved, by the fork) is the parent's: the fork's names
//     become names of it. Its bytes are three-way merged as one unit: the
//     fork's when only the fork rewrote them (written once, whatever the
//     number of names), the parent's when only the parent did, and when
//     both did to different bytes every name the fork adds or changes for
//     it is a conflict (Parent "changed"). A path where both name that
//     inode can conflict only on its bytes (an earlier merge made the name,
//     so the parent "added" it too). Within the merge such an inode is kept
//     while it has no name (FS.pinned: a move deletes the old path first).
//   - any other inode (new in the fork, or gone from the parent) is made
//     once, by its first name in path order, and its other names link to
//     it; when the parent already has a name of it (an earlier merge), the
//     first such name's inode is the one. A path whose parent inode has
//     other names there, or is an inode the fork moved elsewhere, is
//     replaced, not rewritten in place, so those names keep their bytes as
//     in the fork.
//   - a name the fork removes is unlinked: the parent's other names stay,
//     with the link count one less.
//
// A path counts as already merged when it names, for an inode from before
// the fork, that inode (with the bytes the three-way rule gives), and
// otherwise when it holds the same bytes in an inode that is not one the
// fork has elsewhere, that has no name the fork gives another inode, and
// that is the same as for the fork's other names of its inode that are
// already merged.
package vfs
