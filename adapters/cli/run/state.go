package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// State is what the adapter remembers across restarts of its container, in
// StateDir/filepath-cli-adapter.json: the CLI's session (or thread) id to
// resume, and whether FILEPATH_TASK was already given to the CLI (the
// orchestrator sets it on every start of the container).
type State struct {
	path string
	mu   sync.Mutex // guards v
	v    stateFile
}

type stateFile struct {
	Agent    string `json:"agent"`
	Session  string `json:"session,omitempty"`
	TaskSent bool   `json:"task_sent,omitempty"`
}

// StateFile is the adapter's own file in the state directory.
const StateFile = "filepath-cli-adapter.json"

// OpenState reads the state of agent in dir (creating dir). A state saved by
// another agent type is ignored.
func OpenState(dir, agent string) (*State, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s := &State{path: filepath.Join(dir, StateFile), v: stateFile{Agent: agent}}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	var v stateFile
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	if v.Agent == agent {
		s.v = v
	}
	return s, nil
}

// Session is the saved session id, "" for none.
func (s *State) Session() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v.Session
}

// SetSession saves the session id ("" forgets it).
func (s *State) SetSession(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v.Session == id {
		return nil
	}
	s.v.Session = id
	return s.save()
}

// TaskSent reports whether FILEPATH_TASK was given to the CLI already.
func (s *State) TaskSent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v.TaskSent
}

// SetTaskSent records that FILEPATH_TASK was given to the CLI.
func (s *State) SetTaskSent() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v.TaskSent = true
	return s.save()
}

// save writes the file whole or not at all.
func (s *State) save() error {
	b, err := json.Marshal(s.v)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}
