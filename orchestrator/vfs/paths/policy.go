package paths

import (
	"encoding/json"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator"
)

// AllowedPaths reads a node's allowed-paths policy from its config
// ({"allowed_paths": ["/src", "/docs"]}): the only parts of the session's
// files the node may touch, through its mount and through the API with its
// key. None (the default) is the whole workspace. Pass the result to
// vfs.FS.ForNode, which validates each path.
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

// Allowed reports whether the clean path p may be used under a policy of
// clean prefixes (nil: the whole workspace): inside an allowed prefix, or,
// to read (list, walk through), an ancestor of one.
func Allowed(prefixes []string, p string, write bool) bool {
	if prefixes == nil {
		return true
	}
	for _, a := range prefixes {
		if p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
		if !write && (p == "/" || strings.HasPrefix(a, p+"/")) {
			return true
		}
	}
	return false
}
