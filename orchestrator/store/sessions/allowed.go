package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator"
)

// configAllowedPaths reads config.allowed_paths: set is false when the
// config names none (absent or null: the whole workspace). A value that is
// not a list of strings is an error.
func configAllowedPaths(config json.RawMessage) (paths []string, set bool, err error) {
	if len(bytes.TrimSpace(config)) == 0 {
		return nil, false, nil
	}
	var c struct {
		AllowedPaths json.RawMessage `json:"allowed_paths"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, false, orchestrator.FieldErrorf("config", "config must be a JSON object")
	}
	if len(c.AllowedPaths) == 0 || string(c.AllowedPaths) == "null" {
		return nil, false, nil
	}
	if err := json.Unmarshal(c.AllowedPaths, &paths); err != nil {
		return nil, true, orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths must be a list of paths like [\"/src\"]")
	}
	return paths, true, nil
}

// pathWithin reports whether path p lies within allowed path a (equal, or
// below it).
func pathWithin(p, a string) bool {
	a = strings.TrimSuffix(a, "/")
	p = strings.TrimSuffix(p, "/")
	return a == "" || p == a || strings.HasPrefix(p, a+"/")
}

// withinPolicy reports whether p lies within one of the paths of policy.
// An empty policy ([]) or one holding "/" is the whole workspace.
func withinPolicy(p string, policy []string) bool {
	if len(policy) == 0 {
		return true
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
		return false // "/src/../etc" is not within "/src"
	}
	for _, a := range policy {
		if pathWithin(p, a) {
			return true
		}
	}
	return false
}

// inheritAllowedPaths applies a parent's allowed_paths to the config of a
// node placed under it, so that no node reaches more of the workspace than
// its parent: a config naming none gets the parent's; one naming its own
// must keep each path within the parent's, else an error names the path.
// name says which node, for the message. It returns the config to store.
func inheritAllowedPaths(parent, config json.RawMessage, name string) (json.RawMessage, error) {
	pp, pset, err := configAllowedPaths(parent)
	if err != nil {
		return nil, orchestrator.FieldErrorf("parent_id", "the parent's config.allowed_paths is not a list of paths: fix it before adding nodes under it")
	}
	if !pset || withinPolicy("/", pp) {
		return config, nil // the parent reaches the whole workspace
	}
	cp, cset, err := configAllowedPaths(config)
	if err != nil {
		return nil, err
	}
	if !cset {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(config, &m); err != nil || m == nil {
			m = map[string]json.RawMessage{}
		}
		raw, err := json.Marshal(pp)
		if err != nil {
			return nil, err
		}
		m["allowed_paths"] = raw
		out, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("inherit allowed_paths: %w", err)
		}
		return out, nil
	}
	if len(cp) == 0 {
		return nil, orchestrator.FieldErrorf("config.allowed_paths", "%s: config.allowed_paths [] is the whole workspace, outside its parent's allowed_paths %s", name, quoteList(pp))
	}
	for _, p := range cp {
		if !withinPolicy(p, pp) {
			return nil, orchestrator.FieldErrorf("config.allowed_paths", "%s: allowed path %q is outside its parent's allowed_paths %s", name, p, quoteList(pp))
		}
	}
	return config, nil
}

func quoteList(ps []string) string {
	b, _ := json.Marshal(ps)
	return string(b)
}

// keepsWithin checks that a node with config already keeps within the
// allowed_paths of a parent with parent config: it names some, each within
// the parent's. Moving a node under a parent needs it.
func keepsWithin(parent, config json.RawMessage, name string) error {
	if _, pset, _ := configAllowedPaths(parent); !pset {
		return nil
	}
	if _, set, _ := configAllowedPaths(config); !set {
		return orchestrator.FieldErrorf("config.allowed_paths", "%s has no config.allowed_paths, so it would reach more of the workspace than its new parent; give it allowed_paths within the parent's first", name)
	}
	_, err := inheritAllowedPaths(parent, config, name)
	return err
}

// Limits on config.allowed_paths.
const (
	MaxAllowedPaths   = 64   // paths
	MaxAllowedPathLen = 4096 // bytes each, as a workspace path
)

// validAllowedPaths checks config.allowed_paths: absent, null, or a list of
// at most MaxAllowedPaths absolute, clean paths ("/src", not "src",
// "/src/", "/src/../x" or "/a//b").
func validAllowedPaths(config json.RawMessage) error {
	paths, set, err := configAllowedPaths(config)
	if err != nil || !set {
		return err
	}
	if len(paths) > MaxAllowedPaths {
		return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths has %d paths; at most %d", len(paths), MaxAllowedPaths)
	}
	for _, p := range paths {
		switch {
		case len(p) > MaxAllowedPathLen:
			return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths: a path is longer than %d bytes", MaxAllowedPathLen)
		case !strings.HasPrefix(p, "/"):
			return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths: %q must be an absolute path in the workspace, like \"/src\"", p)
		case strings.ContainsFunc(p, func(r rune) bool { return r == 0 || r < 0x20 || r == 0x7f }):
			return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths: %q contains a control character", p)
		case p == "/.." || strings.HasPrefix(p, "/../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
			return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths: %q contains '..'", p)
		case path.Clean(p) != p:
			return orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths: %q is not a clean path; write %q", p, path.Clean(p))
		}
	}
	return nil
}
