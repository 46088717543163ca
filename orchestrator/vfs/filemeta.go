package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"

	"github.com/gabriel-vasile/mimetype"
)

// File metadata (migration 0050, fs_file_meta): a file's MIME type,
// detected from its content, and the provenance of its bytes (their source
// and the node that wrote them). It lives beside the inode, keyed like it,
// so a rename keeps it and every way of writing (the mount, the path API,
// an upload) keeps one set of bytes and one description of them.
//
// The type is detected lazily: a read of the metadata detects it again
// when the inode's data_gen moved since (a write through the mount bumps
// data_gen and nothing else). The provenance is stamped by the writes
// themselves: the path API and uploads on every write; the inode API (the
// mount) when it creates a file and when a file's writer changes (the
// last writer of each inode is remembered per session, so a stream of
// writes by one mount costs one statement, not one per write).

// Sources of a file's bytes (Meta.Source).
const (
	SourceUpload  = "upload"  // a person's: the user API, an upload
	SourceCreated = "created" // an agent's: its mount, its tools
	SourceDerived = "derived" // made from another file: a copy, a format tool's output
)

// mimeSniff is how many bytes of a file the type detection reads.
const mimeSniff = 4096

// maxWriters bounds the per-session memory of each inode's last writer.
const maxWriters = 1 << 16

// Meta is what the filesystem keeps of a file besides its inode.
type Meta struct {
	MimeType string `json:"mime_type,omitempty" jsonschema_description:"detected from the content (magic bytes, not the name); empty for a directory"`
	Source   string `json:"source,omitempty" jsonschema:"enum=upload,enum=created,enum=derived" jsonschema_description:"upload: a person's; created: an agent's; derived: made from another file (a copy)"`
	NodeID   string `json:"node_id,omitempty" jsonschema_description:"the node whose agent last wrote it (absent: a person, or not known)"`
}

// WithSource returns a view of fs whose writes record source (one of the
// Source constants) instead of the default: created for a node's view
// (ForNode), upload for the session's.
func (fs *FS) WithSource(source string) *FS {
	c := *fs
	c.source = source
	return &c
}

// writeSource is the source fs's writes record.
func (fs *FS) writeSource() string {
	switch {
	case fs.source != "":
		return fs.source
	case fs.nodeID != "":
		return SourceCreated
	}
	return SourceUpload
}

// stamp records in tx that fs wrote ino with source ("" : its default).
func (fs *FS) stamp(ctx context.Context, tx *txn, ino int64, source string) error {
	if source == "" {
		source = fs.writeSource()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_file_meta(session_id, ino, source, node_id) VALUES(?,?,?,?)
		ON CONFLICT(session_id, ino) DO UPDATE SET source=excluded.source, node_id=excluded.node_id
		WHERE fs_file_meta.source != excluded.source OR fs_file_meta.node_id != excluded.node_id`, fs.sid, ino, source, fs.nodeID); err != nil {
		return fmt.Errorf("record the writer of inode %d: %w", ino, err)
	}
	fs.noteWriter(tx, ino, source)
	return nil
}

// stampIfNew stamps ino unless fs is known to be its last writer already:
// the inode API's writes (a mount writes a file in many small writes).
func (fs *FS) stampIfNew(ctx context.Context, tx *txn, ino int64) error {
	w := fs.writeSource() + "\x00" + fs.nodeID
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	last := st.writers[ino]
	fs.v.mu.Unlock()
	if last == w {
		return nil
	}
	return fs.stamp(ctx, tx, ino, "")
}

// noteWriter remembers, once tx commits, that fs wrote ino with source.
func (fs *FS) noteWriter(tx *txn, ino int64, source string) {
	w := source + "\x00" + fs.nodeID
	st := fs.v.state(fs.sid)
	tx.onCommit(func() {
		fs.v.mu.Lock()
		defer fs.v.mu.Unlock()
		if st.writers == nil || len(st.writers) >= maxWriters {
			st.writers = map[int64]string{}
		}
		st.writers[ino] = w
	})
}

// copyMeta gives inode to, a copy of from made in tx, from's type (the
// bytes are the same) with source derived and fs's node.
func (fs *FS) copyMeta(ctx context.Context, tx *txn, from, to int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_file_meta(session_id, ino, source, node_id, mime_type, mime_gen)
		SELECT ?1, ?3, ?4, ?5, m.mime_type, (SELECT data_gen FROM fs_inode WHERE session_id=?1 AND ino=?3)
		FROM fs_file_meta m WHERE m.session_id=?1 AND m.ino=?2
		  AND m.mime_gen = (SELECT data_gen FROM fs_inode WHERE session_id=?1 AND ino=?2)
		ON CONFLICT(session_id, ino) DO UPDATE SET source=excluded.source, node_id=excluded.node_id,
		  mime_type=excluded.mime_type, mime_gen=excluded.mime_gen`, fs.sid, from, to, SourceDerived, fs.nodeID); err != nil {
		return fmt.Errorf("copy the metadata of inode %d: %w", from, err)
	}
	return fs.stamp(ctx, tx, to, SourceDerived)
}

// inodeVersion reads ino's mode, size and data generation (through a
// layered fork's levels).
func (fs *FS) inodeVersion(ctx context.Context, q querier, ino int64) (mode uint32, size, gen int64, err error) {
	s, args := `SELECT mode, size, data_gen FROM fs_inode WHERE session_id=? AND ino=?`, []any{fs.sid, ino}
	if lv, layered, lerr := fs.levels(ctx, q); lerr != nil {
		return 0, 0, 0, lerr
	} else if layered {
		b := &sqlb{args: []any{ino}}
		s, args = `SELECT mode, size, data_gen FROM (`+rowUnion(b, lv, "fs_inode", "i.mode, i.size, i.data_gen", "$.ino=?1")+`) AS u ORDER BY lvl LIMIT 1`, b.args
	}
	err = q.QueryRowContext(ctx, s, args...).Scan(&mode, &size, &gen)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && mode == 0) {
		return 0, 0, 0, errorf(syscall.ENOENT, "", "inode %d not found", ino)
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read inode %d: %w", ino, err)
	}
	return mode, size, gen, nil
}

// metaOf returns ino's metadata, detecting its type when the stored one is
// stale (and storing it).
func (fs *FS) metaOf(ctx context.Context, ino int64) (Meta, error) {
	cs, err := fs.init(ctx)
	if err != nil {
		return Meta{}, err
	}
	fs.settleIno(ctx, ino)
	q := fs.v.rq
	mode, size, gen, err := fs.inodeVersion(ctx, q, ino)
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	var mime sql.NullString
	var mgen sql.NullInt64
	err = q.QueryRowContext(ctx, `SELECT source, node_id, mime_type, mime_gen FROM fs_file_meta WHERE session_id=? AND ino=?`, fs.sid, ino).
		Scan(&m.Source, &m.NodeID, &mime, &mgen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// a fork's inherited file: its provenance is its origin's
		if err := fs.inheritedMeta(ctx, q, ino, &m); err != nil {
			return Meta{}, err
		}
	case err != nil:
		return Meta{}, fmt.Errorf("read the metadata of inode %d: %w", ino, err)
	}
	if mode&ModeType != ModeRegular {
		return m, nil
	}
	if mime.Valid && mgen.Valid && mgen.Int64 == gen {
		m.MimeType = mime.String
		return m, nil
	}
	head := make([]byte, min(size, mimeSniff))
	if err := fs.readChunks(ctx, q, ino, cs, head, 0); err != nil {
		return Meta{}, err
	}
	m.MimeType = DetectMIME(head)
	// Stored for the next read. A write that raced with this read bumped
	// data_gen past gen: the next read finds the type stale and detects it
	// again, so no guard is needed here.
	if _, err := fs.v.db.ExecContext(ctx, `INSERT INTO fs_file_meta(session_id, ino, source, node_id, mime_type, mime_gen) VALUES(?,?,?,?,?,?)
		ON CONFLICT(session_id, ino) DO UPDATE SET mime_type=excluded.mime_type, mime_gen=excluded.mime_gen`,
		fs.sid, ino, m.Source, m.NodeID, m.MimeType, gen); err != nil {
		return Meta{}, fmt.Errorf("store the type of inode %d: %w", ino, err)
	}
	return m, nil
}

// inheritedMeta fills m's provenance from the first level of a layered
// fork that has a row for ino (its origin's, as it is now).
func (fs *FS) inheritedMeta(ctx context.Context, q querier, ino int64, m *Meta) error {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil || !layered {
		return err
	}
	seen := map[string]bool{fs.sid: true}
	for _, l := range lv {
		if seen[l.ws] || ino >= l.below {
			continue
		}
		seen[l.ws] = true
		err := q.QueryRowContext(ctx, `SELECT source, node_id FROM fs_file_meta WHERE session_id=? AND ino=?`, l.ws, ino).Scan(&m.Source, &m.NodeID)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the metadata of inode %d: %w", ino, err)
		}
	}
	return nil
}

// DetectMIME returns the MIME type of content that starts with head, from
// its bytes (github.com/gabriel-vasile/mimetype: magic numbers, never the
// name). An empty file is text/plain.
func DetectMIME(head []byte) string {
	if len(head) == 0 {
		return "text/plain"
	}
	return mimetype.Detect(head).String()
}

// Detail is a file's FileInfo with its Meta.
type Detail struct {
	FileInfo
	Meta
}

// Info is Stat with the file's metadata: its MIME type (detected again
// when its content changed since it was last detected), source and writer.
func (fs *FS) Info(ctx context.Context, p string) (Detail, error) {
	info, err := fs.Stat(ctx, p)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{FileInfo: info}
	if info.IsDir {
		return d, nil
	}
	d.Meta, err = fs.metaOf(ctx, info.Ino)
	return d, err
}

// MetaOf is the metadata of the file info describes (from Stat, Peek or
// List of fs).
func (fs *FS) MetaOf(ctx context.Context, info FileInfo) (Meta, error) {
	if info.IsDir {
		return Meta{}, nil
	}
	return fs.metaOf(ctx, info.Ino)
}
