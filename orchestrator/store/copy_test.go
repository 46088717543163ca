package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// TestCopySQLiteToPostgres: Copy (filepath migrate) moves every row of a
// SQLite database into PostgreSQL, verified by count and checksum: the log
// reads back the same, the link counts the triggers made are copied, not
// counted twice, and new rows get ids after the copied ones.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	e := storetest.New(t)
	if e.St.Dialect() != store.SQLite { // FILEPATH_TEST_DATABASE=postgres
		lite, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "f.db"), Now: e.Clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lite.Close() })
		e.Use(lite, storetest.Options{})
	}
	u := e.User(t, "alice")
	s := e.Session(t, u.ID, "s")
	root := e.Node(t, u.ID, s.ID, nil, "root")
	e.Node(t, u.ID, s.ID, &root, "child")
	for i := range 5 {
		d, _ := json.Marshal(map[string]any{"type": "message", "n": i, "text": "héllo\x01"})
		if _, err := e.St.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, NodeID: root.ID, Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	w := e.St.SQL()
	for _, q := range []string{
		`INSERT INTO fs_meta(session_id, next_ino, used_bytes, chunk_size) VALUES(?, 3, 3, 4096)`,
		`INSERT INTO fs_inode(session_id, ino, mode, atime, mtime, ctime) VALUES(?, 1, 16877, 1, 1, 1)`,
		`INSERT INTO fs_inode(session_id, ino, mode, size, atime, mtime, ctime) VALUES(?, 2, 33188, 3, 1, 1, 1)`,
		`INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?, 'a.txt', 1, 2)`,
		`INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?, 2, 0, 3, X'00FF10')`,
	} {
		if _, err := w.Exec(q, s.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	want, err := e.St.Records(ctx, s.ID, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}

	pg, err := store.Open(ctx, store.Config{URL: testkit.PostgresURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	tables, err := store.Copy(ctx, e.St, pg)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	counts := map[string]int64{}
	for _, tc := range tables {
		counts[tc.Table] = tc.Rows
	}
	for tb, n := range map[string]int64{"users": 1, "agent_session": 1, "agent_node": 2, "session_log": int64(len(want)), "fs_inode": 2, "fs_dentry": 1, "fs_data": 1} {
		if counts[tb] != n {
			t.Errorf("%s: %d rows copied, want %d", tb, counts[tb], n)
		}
	}
	got, err := pg.Records(ctx, s.ID, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records read back, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || string(got[i].Data) != string(want[i].Data) || !got[i].At.Equal(want[i].At) {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	var nlink int
	var data []byte
	if err := pg.SQL().QueryRow(`SELECT i.nlink, d.data FROM fs_inode i JOIN fs_data d ON d.session_id = i.session_id AND d.ino = i.ino WHERE i.session_id = ? AND i.ino = 2`, s.ID).Scan(&nlink, &data); err != nil {
		t.Fatal(err)
	}
	if nlink != 1 || string(data) != "\x00\xff\x10" {
		t.Errorf("copied inode: nlink %d, data %q; want 1, \"\\x00\\xff\\x10\"", nlink, data)
	}
	if _, err := pg.SQL().Exec(`INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?, 'b.txt', 1, 2)`, s.ID); err != nil {
		t.Fatalf("a new name after the copy: %v", err)
	}
	if _, err := store.Copy(ctx, e.St, pg); err == nil {
		t.Error("a second copy into a database that has rows succeeded")
	}
}
