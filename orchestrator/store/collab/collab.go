// Package collab keeps what a session's agents share with people and with
// each other beyond the log: requests for approval and their answers, and
// memories kept per repository.
//
//	New(*store.Store, *sessions.Store, Config{}) *Store
//
//	RequestApproval(ctx, sessionID, nodeID, NewApproval) (Approval, created bool, error)   // + its system record
//	GetApproval(ctx, sessionID, id); Approvals(ctx, userID, sessionID, status, limit)
//	AnswerApproval(ctx, userID, sessionID, id, Decision, by) (Approval, error)   // + record; Always: the node's config
//	WithdrawApproval(ctx, sessionID, nodeID, id); WithdrawNodeApprovals(ctx, nodeID)
//	ExpireApprovals(ctx, now) (int, error); NextApprovalExpiry(ctx) (time.Time, bool, error)
//
//	NormalizeRepo(gitURL) string   // a memory scope: host/path
//	SetMemory(ctx, userID, repo, key, text, sessionID, nodeID) (Memory, error)   // kv_store upsert
//	Memories(ctx, userID, repo *string, limit); SearchMemories(ctx, userID, repo, query, limit) ([]Memory, error)
//	GetMemory(ctx, userID, id) (Memory, error); DeleteMemory(ctx, userID, id) error

package collab

import (
	"database/sql"
	"time"

	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// Config configures New (nothing yet).
type Config struct{}

// Store keeps approvals and memories in the store's database. It
// is safe for concurrent use.
type Store struct {
	st       *store.Store
	sessions *sessions.Store // whose sessions and nodes these belong to
	cfg      Config
	db       *gorm.DB // the write connection
	rdb      *gorm.DB // the read pool
	rsql     *sql.DB  // the read pool
}

// New returns the approvals and memories kept in st for the
// sessions of ss.
func New(st *store.Store, ss *sessions.Store, cfg Config) *Store {
	return &Store{st: st, sessions: ss, cfg: cfg, db: st.DB(), rdb: st.ReadDB(), rsql: st.ReadSQL()}
}

func (s *Store) now() time.Time { return s.st.Now() }
