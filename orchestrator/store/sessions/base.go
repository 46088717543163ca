package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator/store"
)

// SetBaseCommit records the commit sessionID's repository was cloned at
// (migration 0020): the default base of its Changes view.
func (s *Store) SetBaseCommit(ctx context.Context, sessionID, commit string) error {
	res, err := s.st.SQL().ExecContext(ctx, `UPDATE agent_session SET base_commit = ? WHERE id = ?`, commit, sessionID)
	if err != nil {
		return fmt.Errorf("set base commit of session %s: %w", sessionID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.NotFound("session", sessionID)
	}
	return nil
}

// BaseCommit returns the commit sessionID's repository was cloned at, ""
// when none is known.
func (s *Store) BaseCommit(ctx context.Context, sessionID string) (string, error) {
	var c sql.NullString
	err := s.rsql.QueryRowContext(ctx, `SELECT base_commit FROM agent_session WHERE id = ?`, sessionID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.NotFound("session", sessionID)
	}
	if err != nil {
		return "", fmt.Errorf("read base commit of session %s: %w", sessionID, err)
	}
	return c.String, nil
}
