// Package store keeps the orchestrator's durable state in one SQLite file:
// users and their credentials, agent sessions, node trees and each session's
// ordered log.
//
// # Connections and durability
//
// Open uses mattn/go-sqlite3 (cgo) through gorm with WAL, foreign_keys=ON,
// busy_timeout and _txlock=immediate. All writes go through ONE connection
// (SQLite has one writer; queueing in database/sql beats SQLITE_BUSY
// retries); reads (Get*, List*, Tree, Records, ...) use a separate read-only
// pool that runs beside the writer. Consequence for callers of DB()/SQL(): a
// query on DB() while a transaction from DB() is open waits forever for the
// single connection — inside a transaction use only its handle.
//
// synchronous=NORMAL by default (Config.Synchronous): a committed
// transaction survives kill -9 of the process (it is in the WAL in the OS
// page cache) but may be lost on power loss or kernel crash if no checkpoint
// has synced it yet; the file never corrupts. SyncFull fsyncs every commit.
// Batch with Append(ctx, sid, recs...) — one transaction, one fsync.
//
// # Migrations
//
// migrations/NNNN_name.sql are embedded and applied in version order, each in
// its own transaction with its row in schema_migrations. A database holding a
// version this binary does not know is refused. 0001_core.sql is the store's;
// 0002_vfs.sql belongs to the vfs package; 0008_collab.sql adds memories,
// approvals and the per-node audit (tool_calls.node_id).
//
// # The session log (DESIGN invariants 1 and 2)
//
// Every record gets seq = last+1 within its session inside the write
// transaction; after the commit it is handed to Config.Publisher, in seq
// order: a per-session mutex is held across insert, commit and publish, and
// the last seq is cached per session. Tree changes (create, update, move,
// delete) append their "node" record in the same transaction as the change.
// WithLog gives other packages the same guarantee for their own changes
// (e.g. the vfs appending a "file" record with a write).
//
// Node records, replayed in order, rebuild the tree exactly (tested): created
// (plus an "input" record with the task, from "user" for a root, "parent"
// otherwise), updated (only when a visible field changed: a log_cursor-only
// patch writes none), moved (and "updated" for every sibling whose
// sort_order was renumbered), deleted (with every removed id; renumbered
// siblings get "updated"). Siblings' sort_order is always 0..n-1. One root
// per session: without parent_id a node becomes the root only if there is
// none (else invalid parent_id); the root cannot be moved.
//
// Lock order: per-session log mutex, then the write connection.
//
// # Scoping (DESIGN invariant 9)
//
// Every method taking a userID only sees that user's rows: another user's
// session or node is not_found, exactly like a missing one. Methods without
// a userID (SessionByID, NodeByID, ActiveNodes, SessionsByStatus, PatchNode,
// UpdateSessionStatus, Append, AppendWithCursor, Records, LastSeq, WithLog)
// are for the runner, relays and handlers that have already authorized the
// session.
//
// # API
//
// Errors are *orchestrator.Error (codes invalid with Field, not_found,
// conflict, unauthorized) or wrapped internal errors.
//
//	Open(ctx, Config) (*Store, error); Close() error
//	DB() *gorm.DB; SQL() *sql.DB; ReadDB() *gorm.DB; Now() time.Time
//	EmbeddedMigrations() ([]Migration, error)
//
//	CreateUser(ctx, name, admin) (User, error)   // conflict on a taken name
//	UserByName(ctx, name); UserByID(ctx, id) (User, error); ListUsers(ctx); CountUsers(ctx) (int, error)
//	CreateLoginToken(ctx, userID, ttl) (token string, err)   // single use, stored hashed
//	ConsumeLoginToken(ctx, token) (User, error)               // unauthorized when used/expired/unknown
//	CreateAPIKey(ctx, userID, name) (key string, APIKey, error)   // "fp_…", shown once, stored as sha256
//	CreateAPIKeyExpiring(ctx, userID, name, expiresAt) (key string, APIKey, error) // AuthAPIKey refuses it from expiresAt on (*APIKeyExpiredError)
//	CreateNodeAPIKey(ctx, userID, sessionID, nodeID) (key string, APIKey, error)
//	AuthAPIKey(ctx, key) (Principal{User, SessionID, NodeID}, error)
//	UserByAPIKey(ctx, key) (User, error)   // user keys only; node keys → unauthorized
//	ListAPIKeys(ctx, userID) ([]APIKey, error); DeleteAPIKey(ctx, userID, keyID) error
//	CreateWebSession(ctx, userID, ttl) (cookie string, err); UserByWebSession(ctx, cookie) (User, error)
//	DeleteWebSession(ctx, cookie) error; DeleteExpired(ctx) (int64, error)
//
//	CreateSession(ctx, userID, NewSession{Name, GitRepoURL}) (Session, error)
//	GetSession(ctx, userID, id) (Session, error); ListSessions(ctx, userID) ([]Session, error)
//	DeleteSession(ctx, userID, id) error     // cascades nodes, log, node keys, vfs tables
//	SessionByID(ctx, id) (Session, error); SessionsByStatus(ctx, statuses...) ([]Session, error)
//	UpdateSessionStatus(ctx, sessionID, status) error   // running sets started_at
//
//	CreateNode(ctx, userID, sessionID, NewNode{Name, AgentType, Model, ParentID, Image, Task, Config}) (Node, error)
//	GetNode(ctx, userID, sessionID, nodeID) (Node, error); NodeByID(ctx, nodeID) (Node, error)
//	Tree(ctx, userID, sessionID) ([]Node, error)   // depth-first, with done/total
//	UpdateNode(ctx, userID, sessionID, nodeID, NodePatch) (Node, error)
//	PatchNode(ctx, sessionID, nodeID, NodePatch) (Node, error)   // runner/relay, any owner
//	MoveNode(ctx, userID, sessionID, nodeID, parentID *string, sortOrder int) (Node, error)
//	DeleteNode(ctx, userID, sessionID, nodeID) (removedIDs []string, err error)
//	ActiveNodes(ctx) ([]Node, error)   // for reconcile at start-up
//
//	Append(ctx, sessionID, recs ...protocol.Record) ([]protocol.Record, error)   // Seq assigned; At zero: now; Ref -k: k records back
//	AppendWithCursor(ctx, sessionID, nodeID, cursor, recs...) ([]protocol.Record, error)   // + node log_cursor, one tx
//	WithLog(ctx, sessionID, func(*Tx) error) ([]protocol.Record, error); (*Tx).DB(); (*Tx).Append(recs...)
//	Records(ctx, sessionID, after, limit, nodeID) ([]protocol.Record, error); LastSeq(ctx, sessionID) (int64, error)
//
//	NormalizeRepo(gitURL) string   // a memory scope: host/path
//	SetMemory(ctx, userID, repo, key, text, sessionID, nodeID) (Memory, error)   // kv_store upsert
//	Memories(ctx, userID, repo *string, limit); SearchMemories(ctx, userID, repo, query, limit) ([]Memory, error)
//	GetMemory(ctx, userID, id) (Memory, error); DeleteMemory(ctx, userID, id) error
//
//	RequestApproval(ctx, sessionID, nodeID, NewApproval) (Approval, created bool, error)   // + its system record
//	GetApproval(ctx, sessionID, id); Approvals(ctx, userID, sessionID, status, limit)
//	AnswerApproval(ctx, userID, sessionID, id, Decision, by) (Approval, error)   // + record; Always: config
//	ExpireApprovals(ctx, now) (int, error); NextApprovalExpiry(ctx) (time.Time, bool, error)
//	ApprovalPolicies(config) (map[string]string, error)
//
//	RecordToolCall(ctx, NewToolCall) error   // an agent-API call; tool/command rows come with AppendWithCursor
//	ToolCalls(ctx, sessionID, nodeID, before, limit) ([]ToolCall, error)   // a node's audit, newest first
package store
