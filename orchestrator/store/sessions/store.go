package sessions

import (
	"database/sql"
	"time"

	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator/store"
)

// DefaultMaxNodes is the default bound on the agents of one session.
const DefaultMaxNodes = 1000

// Config holds the limits of sessions.
type Config struct {
	// MaxNodes bounds the agents of one session (DefaultMaxNodes), so that
	// agents spawning agents cannot grow a tree without end.
	MaxNodes int
	// MaxCheckTimeout bounds the time limit a session's health check may ask
	// for (DefaultMaxCheckTimeout).
	MaxCheckTimeout time.Duration
	// DefaultBudget is the LLM budget a new session starts with (nil
	// fields: unlimited); its owner changes it with SetSessionBudget.
	DefaultBudget Budget
}

// Store keeps sessions and their trees in the store's database; their
// changes go to the sessions' logs. It is safe for concurrent use.
type Store struct {
	st   *store.Store
	cfg  Config
	db   *gorm.DB // the write connection
	rdb  *gorm.DB // the read pool
	rsql *sql.DB  // the read pool
}

// New returns the sessions kept in st, with the limits of cfg.
func New(st *store.Store, cfg Config) *Store {
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	if cfg.MaxCheckTimeout <= 0 {
		cfg.MaxCheckTimeout = DefaultMaxCheckTimeout
	}
	return &Store{st: st, cfg: cfg, db: st.DB(), rdb: st.ReadDB(), rsql: st.ReadSQL()}
}

func (s *Store) now() time.Time { return s.st.Now() }
