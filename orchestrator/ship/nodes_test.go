package ship_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// dirs lends every node the same workspace directory.
type dirs string

func (d dirs) Workspace(context.Context, string) (string, func(), error) {
	return string(d), func() {}, nil
}

// TestPullRequestOnTheNode: a pull request opened of a node's branch is
// kept on the node, in a "node" record of the session log (the tree shows
// its link from it); opening it again after a new push updates the same
// pull request and leaves the node with its one link, adding no record.
func TestPullRequestOnTheNode(t *testing.T) {
	st, alice, sess := storetest.NewSession(t)
	ctx := context.Background()
	sec := secrets.New(st.St, secrets.Config{Key: bytes.Repeat([]byte{6}, secrets.KeySize)})
	const token = "tok-NODE-1"
	if _, err := sec.Set(ctx, alice.ID, "", "gh", secrets.NewSecret{Kind: secrets.KindGitHubToken, Host: "git.example.com", Value: token}); err != nil {
		t.Fatal(err)
	}
	f := newFakeForge(t, token)
	node := st.Node(t, alice.ID, sess.ID, nil, "fixer")
	nodes := ship.NewNodes(ship.New(ship.Config{Secrets: sec, AllowPrivate: true}), st.Sessions, dirs(t.TempDir()))
	req := ship.NodePullRequest{RemoteURL: "https://git.example.com/o/r.git", Title: "Fix the bug", Body: "Off by one.", APIBase: f.URL + "/gh"}

	pr, err := nodes.OpenPullRequest(ctx, alice.ID, sess.ID, node.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.PullRequestLink{Forge: ship.ForgeGitHub, URL: pr.URL, Number: 1, Branch: "filepath/fixer", Base: "main"}
	got, err := st.Sessions.GetNode(ctx, alice.ID, sess.ID, node.ID)
	if err != nil || got.PullRequest == nil || *got.PullRequest != want {
		t.Fatalf("the node carries %+v (%v), want %+v", got.PullRequest, err, want)
	}
	linked := func() []protocol.PullRequestLink {
		recs, err := st.St.Records(ctx, sess.ID, 0, 0, node.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []protocol.PullRequestLink
		for _, r := range recs {
			var nc protocol.NodeChange
			if r.Kind == protocol.KindNode && json.Unmarshal(r.Data, &nc) == nil && nc.Node.PullRequest != nil {
				out = append(out, *nc.Node.PullRequest)
			}
		}
		return out
	}
	if l := linked(); len(l) != 1 || l[0] != want {
		t.Fatalf("node records with a pull request: %+v", l)
	}

	req.Title = "Fix the bug (v2)"
	again, err := nodes.OpenPullRequest(ctx, alice.ID, sess.ID, node.ID, req)
	if err != nil || !again.Updated || again.URL != pr.URL {
		t.Fatalf("again: %+v, %v", again, err)
	}
	if got, _ := st.Sessions.GetNode(ctx, alice.ID, sess.ID, node.ID); got.PullRequest == nil || *got.PullRequest != want {
		t.Fatalf("after the update the node carries %+v", got.PullRequest)
	}
	if l := linked(); len(l) != 1 {
		t.Fatalf("the update added node records: %+v", l)
	}
	if tree, _ := st.Sessions.Tree(ctx, alice.ID, sess.ID); len(tree) != 1 || tree[0].PullRequest == nil || tree[0].PullRequest.URL != pr.URL {
		t.Fatalf("the tree's node: %+v", tree)
	}
}
