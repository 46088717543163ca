// Package sessions keeps agent sessions and their node trees: each tree
// change in one transaction with its "node" record in the session's log, a
// node's config (allowed paths, approval policies), its generations, the
// relay's position in its container's log, and what its agents spent
// through the LLM gateway against the session's budget.
//
// # The tree in the log
//
// Node records, replayed in order, rebuild the tree exactly (tested): created
// (plus an "input" record with the task, from "user" for a root, "parent"
// otherwise), updated (only when a visible field changed: a log_cursor-only
// patch writes none), moved (and "updated" for every sibling whose
// sort_order was renumbered), deleted (with every removed id; renumbered
// siblings get "updated"). Siblings' sort_order is always 0..n-1. One root
// per session: without parent_id a node becomes the root only if there is
// none (else invalid parent_id); the root cannot be moved. A session holds
// at most Config.MaxNodes nodes.
//
// # API
//
//	New(*store.Store, Config) *Store
//
//	CreateSession(ctx, userID, NewSession{Name, GitRepoURL, Checks}) (protocol.Session, error)
//	GetSession(ctx, userID, id); ListSessions(ctx, userID); SessionByID(ctx, id); SessionsByStatus(ctx, statuses...)
//	PatchSession(ctx, userID, id, SessionPatch); SetSessionChecks(...); SetSessionBudget(ctx, userID, id, BudgetPatch)
//	DeleteSession(ctx, userID, id) error     // cascades nodes, log, node keys, vfs tables
//	UpdateSessionStatus(ctx, sessionID, status) error   // running sets started_at
//
//	CreateNode(ctx, userID, sessionID, NewNode{Name, AgentType, Model, ParentID, Image, Task, Config}) (Node, error)
//	GetNode(ctx, userID, sessionID, nodeID); NodeByID(ctx, nodeID); Tree(ctx, userID, sessionID)   // depth-first, with done/total
//	UpdateNode(ctx, userID, sessionID, nodeID, NodePatch); PatchNode(ctx, sessionID, nodeID, NodePatch)   // runner/relay, any owner
//	MoveNode(ctx, userID, sessionID, nodeID, parentID *string, sortOrder int) (Node, error)
//	DeleteNode(ctx, userID, sessionID, nodeID) (removedIDs []string, err error)
//	ActiveNodes(ctx) ([]Node, error)   // for reconcile at start-up
//	ContinueNode(ctx, sessionID, nodeID) (Continuation, error)   // the next generation after a handoff
//	AppendWithCursor(ctx, sessionID, nodeID, cursor, recs...) ([]protocol.Record, error)   // + node log_cursor and audit rows, one tx
//
//	RecordUsage(ctx, us ...Usage) error; SessionSpend(ctx, sessionID) (Spend, error); SessionUsage(ctx, sessionID, after, limit)
//
//	Inside a transaction of the session's log (collab): NodeIn(g, sessionID, nodeID), CheckOwner(g, userID, sessionID),
//	AllowKind(tx, nodeID, kind), ApprovalPolicies(config)
package sessions
