package vfs

import (
	"encoding/json"

	"github.com/filepath-dev/filepath/orchestrator"
)

// AllowedPaths reads a node's allowed-paths policy from its config
// ({"allowed_paths": ["/src", "/docs"]}): the only parts of the session's
// files the node may touch, through its mount and through the API with its
// key. None (the default) is the whole workspace. Pass the result to
// FS.ForNode, which validates each path.
func AllowedPaths(config json.RawMessage) ([]string, error) {
	if len(config) == 0 {
		return nil, nil
	}
	var c struct {
		AllowedPaths json.RawMessage `json:"allowed_paths"`
	}
	if err := json.Unmarshal(config, &c); err != nil || len(c.AllowedPaths) == 0 || string(c.AllowedPaths) == "null" {
		return nil, nil
	}
	var paths []string
	if err := json.Unmarshal(c.AllowedPaths, &paths); err != nil {
		return nil, orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths must be a list of paths like [\"/src\"]")
	}
	return paths, nil
}

// Visible reports whether p (a clean path) can be seen through fs: it is
// inside an allowed path or leads to one, as in a listing of its parent.
// Without a policy everything is visible.
func (fs *FS) Visible(p string) bool { return fs.allowedPath(p, false) }
