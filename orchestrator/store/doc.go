// Package store is the orchestrator's durable state in one SQLite file (or a
// PostgreSQL database, below): the
// connections, the migrations and each session's ordered log. The noun
// packages below it keep their tables in the same file and take a *Store:
//
//	identity   users, login links, browser sessions, API keys (user and node)
//	sessions   sessions and their node trees, node config, generations, the
//	           relay's append with its log cursor, LLM usage and budgets
//	audit      each node's audit (tool_calls): its tools, commands, API calls
//	collab     approvals, memories, session secrets
//	storetest  all of them over a test's database (test support)
//
// The base knows none of them (internal/layering checks the arrows).
//
// # Connections and durability
//
// Open uses mattn/go-sqlite3 (cgo) through gorm with WAL, foreign_keys=ON,
// busy_timeout and _txlock=immediate. All writes go through ONE connection
// (SQLite has one writer; queueing in database/sql beats SQLITE_BUSY
// retries); reads (Get*, List*, Tree, Records, ...) use a separate read-only
// pool that runs beside the writer. Consequence for callers of DB()/SQL(): a
// query on DB() while a transaction from DB() is open waits forever for the
// single connection — inside a transaction use only its handle. Statements a
// noun package runs often are prepared once (WriteStmt, ReadStmt), before a
// transaction, never inside one.
//
// synchronous=NORMAL by default (Config.Synchronous): a committed
// transaction survives kill -9 of the process (it is in the WAL in the OS
// page cache) but may be lost on power loss or kernel crash if no checkpoint
// has synced it yet; the file never corrupts. SyncFull fsyncs every commit.
// Batch with Append(ctx, sid, recs...) — one transaction, one fsync.
//
// # PostgreSQL
//
// With Config.URL (FILEPATH_DATABASE_URL, postgres://…) the same tables live
// in a PostgreSQL database instead, through gorm's postgres driver over
// internal/pgsql's connection: the SQL of the store and the vfs is written
// once with SQLite's ? placeholders, which pgsql sends as $n. The little
// SQL that differs is chosen by Dialect (JSONText, Contains; the vfs asks
// pgsql.Is). The connections keep SQLite's shape: one write connection
// (LOCKS.md holds as written) and a read pool whose transactions are
// REPEATABLE READ, one snapshot each like a WAL reader. The database must
// compare text in byte order (collation C; Open refuses another) so that
// names sort as in SQLite. Flags stay integers 0/1 and times Unix
// milliseconds in both.
//
// # Migrations
//
// migrations/NNNN_name.sql are embedded and applied in version order by one
// migrator, each in its own transaction with its row in schema_migrations:
// one sequence for every package's tables (0002_vfs.sql and the later vfs
// ones belong to orchestrator/vfs; 0008_collab.sql adds memories, approvals
// and the per-node audit). A database holding a version this binary does
// not know is refused. migrations/postgres/ holds PostgreSQL's version of
// each, with the same version and name (TestDialectMigrationsMatch); the
// two schemas match table by table, column by column, index by index
// (TestDialectSchemasMatch). A new migration is written twice.
//
// # The session log (DESIGN invariants 1 and 2)
//
// Records are protocol.Record; the store keeps the session id beside them
// (the session_log column, and Publisher.Publish's first argument). Every
// record gets seq = last+1 within its session inside the write transaction;
// after the commit it is handed to Config.Publisher, in seq order: a
// per-session mutex is held across insert, commit and publish, and the last
// seq is cached per session. WithLog gives the noun packages (and others,
// e.g. the vfs appending a "file" record with a write) that guarantee for
// their own changes: a tree change appends its "node" record in the same
// transaction as the change; AppendWith appends records and runs more in
// their transaction (a relay's log cursor and audit rows). EndLog runs a
// session's deletion under its log lock.
//
// Node records, replayed in order, rebuild the tree exactly (tested in
// orchestrator/store/sessions).
//
// Lock order: per-session log mutex, then the write connection.
//
// # Scoping (DESIGN invariant 9)
//
// Every method of a noun package taking a userID only sees that user's
// rows: another user's session or node is not_found, exactly like a missing
// one (RequireUser maps an empty user id to none). Methods without a userID
// (SessionByID, NodeByID, PatchNode, Append, Records, WithLog, ...) are for
// the runner, relays and handlers that have already authorized the session.
//
// # API
//
// Errors are *orchestrator.Error (codes invalid with Field, not_found,
// conflict, unauthorized) or wrapped internal errors.
//
//	Open(ctx, Config) (*Store, error); Close() error
//	DB() *gorm.DB; SQL() *sql.DB; ReadDB() *gorm.DB; ReadSQL() *sql.DB; Now() time.Time
//	WriteStmt(ctx, query), ReadStmt(ctx, query) (*sql.Stmt, error)   // prepared once, closed by Close
//	EmbeddedMigrations() ([]Migration, error)
//
//	Append(ctx, sessionID, recs ...protocol.Record) ([]protocol.Record, error)   // Seq assigned; At zero: now; Ref -k: k records back
//	AppendWith(ctx, sessionID, recs, func(*Tx, stored) error) ([]protocol.Record, error)
//	WithLog(ctx, sessionID, func(*Tx) error) ([]protocol.Record, error); (*Tx).DB(); (*Tx).Append(recs...); (*Tx).AppendJSON(nodeID, kind, v)
//	Records(ctx, sessionID, after, limit, nodeID) ([]protocol.Record, error); LastSeq(ctx, sessionID) (int64, error)
//	LastRecordOf(ctx, sessionID, nodeID, kind, typ) (protocol.Record, error)
//	EndLog(sessionID, del func() error) error
//
//	NewID(); Millis(t); FromMillis(ms); NotFound(what, id); RequireUser(userID); IsConstraint(err, code)
package store
