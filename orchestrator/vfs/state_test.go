package vfs

import (
	"encoding/json"
	"testing"
	"time"
)

func TestKVAndToolCalls(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	v, sid := f.v, f.sid
	if err := v.KVSet(ctx, sid, "user:prefs", json.RawMessage(`{"theme":"dark"}`)); err != nil {
		t.Fatal(err)
	}
	if err := v.KVSet(ctx, sid, "bad", json.RawMessage(`{nope`)); err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if err := v.KVSet(ctx, sid, "user:prefs", json.RawMessage(`{"theme":"light"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := v.KVGet(ctx, sid, "user:prefs")
	if err != nil || string(got) != `{"theme":"light"}` {
		t.Fatal(string(got), err)
	}
	if list, _ := v.KVList(ctx, sid); len(list) != 1 || list[0].Key != "user:prefs" {
		t.Fatalf("list %+v", list)
	}
	if err := v.KVDelete(ctx, sid, "user:prefs"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.KVGet(ctx, sid, "user:prefs"); err == nil {
		t.Fatal("deleted key found")
	}
	start := time.Unix(1000, 0)
	tests := []struct {
		name string
		call NewToolCall
		ok   bool
	}{
		{name: "result", call: NewToolCall{Name: "read_file", Params: json.RawMessage(`{"path":"/a"}`), Result: json.RawMessage(`"ok"`), StartedAt: start, CompletedAt: start.Add(2 * time.Second)}, ok: true},
		{name: "error", call: NewToolCall{Name: "read_file", Err: "not found", StartedAt: start, CompletedAt: start}, ok: true},
		{name: "both", call: NewToolCall{Name: "x", Result: json.RawMessage(`1`), Err: "e", StartedAt: start, CompletedAt: start}},
		{name: "neither", call: NewToolCall{Name: "x", StartedAt: start, CompletedAt: start}},
		{name: "bad params", call: NewToolCall{Name: "x", Params: json.RawMessage(`{`), Err: "e", StartedAt: start, CompletedAt: start}},
		{name: "backwards", call: NewToolCall{Name: "x", Err: "e", StartedAt: start, CompletedAt: start.Add(-time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.RecordToolCall(ctx, sid, tc.call)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, ok %v", err, tc.ok)
			}
		})
	}
	calls, err := v.ToolCalls(ctx, sid, "read_file", 10)
	if err != nil || len(calls) != 2 || calls[1].DurationMS != 2000 || calls[0].Error != "not found" {
		t.Fatalf("calls %+v %v", calls, err)
	}
	if _, err := f.db.Exec(`UPDATE tool_calls SET name='y'`); err == nil {
		t.Fatal("tool_calls accepted an update")
	}
}
