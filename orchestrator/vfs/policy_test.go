package vfs

import "testing"

func TestVisible(t *testing.T) {
	f := newFixture(t, Config{})
	node, err := f.fs.ForNode("n1", []string{"/src/app"})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"/": true, "/src": true, "/src/app": true, "/src/app/x.go": true, "/src/other": false, "/docs": false, "/src/apple": false} {
		if got := node.Visible(p); got != want {
			t.Errorf("Visible(%s) = %v, want %v", p, got, want)
		}
		if !f.fs.Visible(p) {
			t.Errorf("without a policy, %s is not visible", p)
		}
	}
}
