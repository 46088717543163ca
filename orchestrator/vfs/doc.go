// Package vfs is the session virtual filesystem: agentfs inode storage in SQLite,
// an inode-level API for the FUSE mount, a path-level API (which
// orchestrator/api serves over REST), path security, audit, key-value state,
// live file events and agentfs export. It knows nothing of HTTP.
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
// as parent links (paths.go), cleared by every rename and import, gives
// event paths and path lengths without walking to the root.
//
// Paths are at most MaxPathLen (4096) bytes through both APIs: the path API
// checks the paths it is given, and no call (mkdir, create, symlink, link,
// rename, also of a directory with deep contents, copy) makes a longer one.
// Grep, copy, delete, move and export do work in proportion to the tree: no
// path is built per entry, and a copied, deleted or newly made directory
// gives one file event, which stands for everything in it.
//
// After each commit the Invalidator (SetInvalidator) learns which names and
// inodes the transaction touched, with the origin its context carries
// (WithOrigin): the workspace Fanout turns that into FUSE invalidation
// notices for the session's other mounts, so their kernels may cache long.
//
// Every change is one savepoint in a batch of changes that commits a few
// milliseconds later (group commit, batch.go); a change without an origin
// (the REST API) commits before its call returns, and Fsync commits the
// batch with a full sync. Reads see the open batch (they commit it first
// when it changed what they read). The link count is fs_inode.nlink, kept by triggers on
// fs_dentry (migration 0010). Directory nlink is the dentry count (1), as agentfs defines
// it; tools read nlink < 2 as "unknown" and do not use the leaf optimisation.
package vfs
