package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// TestMessageAttachments: files uploaded into the node's workspace and
// attached to a message reach the agent as paths in its content and as
// attachments (path, size, detected type) in the record; a path that is
// not a file is refused with its name, and nothing is sent.
func TestMessageAttachments(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	tree := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/tree", f.a.key, "")
	var nodes struct{ Data []struct{ ID string } }
	json.Unmarshal(tree.body, &nodes)
	if len(nodes.Data) == 0 {
		t.Fatalf("no root node: %s", tree.body)
	}
	msgs := "/api/v1/sessions/" + f.sid + "/nodes/" + nodes.Data[0].ID + "/messages"
	body, ct := multipartBody(t, [2]string{"sales.png", pngFile(t)}, [2]string{"notes.md", "# notes\n"})
	if r := f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/upload?dir=/uploads", f.a.key, body, "Content-Type", ct); r.status != 201 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}

	r := f.e.doT(t, "POST", msgs, f.a.key, `{"content":"Sum the sales","attachments":["/uploads/sales.png","/workspace/uploads/notes.md"]}`)
	if r.status != 202 {
		t.Fatalf("message: %d %s", r.status, r.body)
	}
	var rec protocol.Record
	if err := json.Unmarshal(r.body, &rec); err != nil {
		t.Fatal(err)
	}
	var in protocol.MessageInput
	if err := json.Unmarshal(rec.Data, &in); err != nil {
		t.Fatal(err)
	}
	want := []protocol.Attachment{{Path: "/uploads/sales.png", MimeType: "image/png"}, {Path: "/uploads/notes.md", SizeBytes: 8, MimeType: "text/plain; charset=utf-8"}}
	if len(in.Attachments) != 2 || in.Attachments[0].Path != want[0].Path || in.Attachments[0].MimeType != want[0].MimeType || in.Attachments[0].SizeBytes == 0 ||
		in.Attachments[1] != want[1] {
		t.Fatalf("attachments %+v, want %+v", in.Attachments, want)
	}
	for _, w := range []string{"Sum the sales\n\nAttached files (in your workspace):", "\n- /workspace/uploads/sales.png (", "image/png)", "\n- /workspace/uploads/notes.md (8 B, text/plain"} {
		if !strings.Contains(in.Content, w) {
			t.Fatalf("content lacks %q:\n%s", w, in.Content)
		}
	}

	// Attachments alone make a message.
	if r := f.e.doT(t, "POST", msgs, f.a.key, `{"attachments":["uploads/notes.md"]}`); r.status != 202 || !strings.Contains(string(r.body), "Attached file (in your workspace):") {
		t.Fatalf("attachment without words: %d %s", r.status, r.body)
	}

	before := f.e.doT(t, "GET", msgs, f.a.key, "")
	for _, tc := range []struct{ body, want string }{
		{`{"content":"x","attachments":["/uploads/missing.csv"]}`, "attachment /uploads/missing.csv is not in the node's workspace"},
		{`{"content":"x","attachments":["/uploads"]}`, "attachment /uploads is a directory, not a file"},
		{`{"content":"x","attachments":["/uploads/notes.md","/uploads/nope"]}`, "/uploads/nope"},
		{`{"content":"x","attachments":[` + strings.Repeat(`"/a",`, 20) + `"/a"]}`, "at most 20 files"},
		{`{"content":"  "}`, "attach a file"},
	} {
		r := f.e.doT(t, "POST", msgs, f.a.key, tc.body)
		if r.status != 422 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: %d %s, want 422 naming %q", tc.body, r.status, r.body, tc.want)
		}
	}
	if after := f.e.doT(t, "GET", msgs, f.a.key, ""); string(after.body) != string(before.body) {
		t.Fatalf("a refused message changed the log:\n%s\n%s", before.body, after.body)
	}
}
