package collab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// Limits of the memory store.
const (
	MaxMemoryKeyLen     = 200     // bytes of a key
	MaxMemoryTextLen    = 8 << 10 // bytes of a memory's text
	MaxMemoriesPerScope = 2000    // memories of one user and repository
	MaxMemoryQueryWords = 16      // words of a search query that count
	DefaultMemoryLimit  = 20      // memories a list or search answers
	MaxMemoryLimit      = 500
)

// Memory is one learning of the memory store: a key and its text, kept for
// a user and a repository (kv_store semantics, see 0008_collab.sql).
type Memory struct {
	ID string `json:"id"`
	// Repo is the normalised git URL of the sessions that share the memory
	// ("" : the user's sessions without a repository).
	Repo      string    `json:"repo"`
	Key       string    `json:"key"`
	Text      string    `json:"text"`
	SessionID string    `json:"session_id,omitempty"` // where it was stored last
	NodeID    string    `json:"node_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Score is how well it matched a search (absent in lists).
	Score int `json:"score,omitempty"`
}

// NormalizeRepo turns a git URL into the name of its memory scope: host
// (lower case, without user and default port) and path, without a trailing
// ".git" or "/": https://Git@GitHub.com/o/r.git, ssh://git@github.com/o/r
// and git@github.com:o/r are all "github.com/o/r". "" stays "".
func NormalizeRepo(raw string) string {
	u := strings.TrimSpace(raw)
	if u == "" {
		return ""
	}
	var host, path string
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		p, err := url.Parse(strings.ToLower(scheme) + "://" + rest)
		if err != nil {
			return strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
		}
		host = strings.ToLower(p.Hostname())
		if port := p.Port(); port != "" && !defaultPort(p.Scheme, port) {
			host += ":" + port
		}
		path = p.Path
	} else if at, rest, ok := strings.Cut(u, ":"); ok && !strings.Contains(at, "/") {
		// scp-like [user@]host:path
		if _, h, ok := strings.Cut(at, "@"); ok {
			at = h
		}
		host, path = strings.ToLower(at), rest
	} else {
		path = u
	}
	path = strings.Trim(path, "/")
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	path = strings.TrimSuffix(strings.TrimSuffix(path, ".git"), "/")
	path = strings.TrimPrefix(path, "~")
	if host == "" {
		return path
	}
	return host + "/" + path
}

func defaultPort(scheme, port string) bool {
	switch scheme {
	case "https":
		return port == "443"
	case "http":
		return port == "80"
	case "ssh":
		return port == "22"
	case "git":
		return port == "9418"
	}
	return false
}

func validMemory(key, text string) (string, error) {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", orchestrator.FieldErrorf("key", "key is required: a short name for the learning, e.g. \"tests need -race\"")
	case len(key) > MaxMemoryKeyLen:
		return "", orchestrator.FieldErrorf("key", "key is longer than %d bytes", MaxMemoryKeyLen)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return "", orchestrator.FieldErrorf("key", "key must not contain control characters")
	case !utf8.ValidString(key) || !utf8.ValidString(text):
		return "", orchestrator.FieldErrorf("text", "key and text must be UTF-8")
	case strings.TrimSpace(text) == "":
		return "", orchestrator.FieldErrorf("text", "text is required")
	case len(text) > MaxMemoryTextLen:
		return "", orchestrator.FieldErrorf("text", "text is longer than %d bytes: keep a memory to one learning", MaxMemoryTextLen)
	}
	return key, nil
}

type memoryRow struct {
	ID        string
	Repo      string
	Key       string
	Value     string
	SessionID string
	NodeID    string
	CreatedAt int64
	UpdatedAt int64
}

const memoryCols = `id, repo, key, value, session_id, node_id, created_at, updated_at`

func (r memoryRow) memory() Memory {
	return Memory{ID: r.ID, Repo: r.Repo, Key: r.Key, Text: r.Value, SessionID: r.SessionID, NodeID: r.NodeID,
		CreatedAt: store.FromMillis(r.CreatedAt), UpdatedAt: store.FromMillis(r.UpdatedAt)}
}

// SetMemory stores text under key in the memory of userID and repo (a
// normalised URL, NormalizeRepo): a new key is created, an existing one
// gets the new text and updated time (kv_store's upsert). sessionID and
// nodeID say who stored it. A scope holds at most MaxMemoriesPerScope.
func (s *Store) SetMemory(ctx context.Context, userID, repo, key, text, sessionID, nodeID string) (Memory, error) {
	key, err := validMemory(key, text)
	if err != nil {
		return Memory{}, err
	}
	var out Memory
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Raw(`SELECT COUNT(*) FROM memories WHERE user_id = ? AND repo = ? AND key != ?`, userID, repo, key).Scan(&n).Error; err != nil {
			return fmt.Errorf("count memories: %w", err)
		}
		if n >= MaxMemoriesPerScope {
			return orchestrator.Errorf(orchestrator.EConflict, "this repository already holds %d memories, the most it may: delete some (GET and DELETE /api/v1/memories) or store under an existing key", n)
		}
		now := store.Millis(s.now())
		if err := tx.Exec(`INSERT INTO memories (id, user_id, repo, key, value, session_id, node_id, created_at, updated_at)
			VALUES (?,?,?,?,?,?,?,?,?)
			ON CONFLICT (user_id, repo, key) DO UPDATE SET value = excluded.value, session_id = excluded.session_id,
				node_id = excluded.node_id, updated_at = excluded.updated_at`,
			store.NewID(), userID, repo, key, text, sessionID, nodeID, now, now).Error; err != nil {
			if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
				return store.NotFound("user", userID)
			}
			return fmt.Errorf("store memory: %w", err)
		}
		var rows []memoryRow
		if err := tx.Raw(`SELECT `+memoryCols+` FROM memories WHERE user_id = ? AND repo = ? AND key = ?`, userID, repo, key).Scan(&rows).Error; err != nil || len(rows) != 1 {
			return fmt.Errorf("read stored memory: %v", err)
		}
		out = rows[0].memory()
		return nil
	})
	return out, err
}

// Memories lists userID's memories, most recently updated first: of one
// repo scope, or of every scope when repo is nil.
func (s *Store) Memories(ctx context.Context, userID string, repo *string, limit int) ([]Memory, error) {
	limit = memoryLimit(limit)
	q := `SELECT ` + memoryCols + ` FROM memories WHERE user_id = ?`
	args := []any{userID}
	if repo != nil {
		q += ` AND repo = ?`
		args = append(args, *repo)
	}
	q += ` ORDER BY updated_at DESC, id LIMIT ?`
	var rows []memoryRow
	if err := s.rdb.WithContext(ctx).Raw(q, append(args, limit)...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	out := make([]Memory, len(rows))
	for i, r := range rows {
		out[i] = r.memory()
	}
	return out, nil
}

func memoryLimit(limit int) int {
	if limit <= 0 {
		return DefaultMemoryLimit
	}
	return min(limit, MaxMemoryLimit)
}

// SearchMemories finds userID's memories of repo whose key or text holds a
// word of query (case-insensitive; words of at least two letters or
// digits), ranked by a simple score: each query word counts 3 when it is
// in the key and 1 per occurrence in the text (at most 5), more recently
// updated first on a tie. An empty query lists the newest.
func (s *Store) SearchMemories(ctx context.Context, userID, repo, query string, limit int) ([]Memory, error) {
	limit = memoryLimit(limit)
	words := queryWords(query)
	if len(words) == 0 {
		return s.Memories(ctx, userID, &repo, limit)
	}
	q := `SELECT ` + memoryCols + ` FROM memories WHERE user_id = ? AND repo = ? AND (`
	args := []any{userID, repo}
	for i, w := range words {
		if i > 0 {
			q += ` OR `
		}
		q += s.st.Contains("lower(key)", "?") + ` OR ` + s.st.Contains("lower(value)", "?")
		args = append(args, w, w)
	}
	q += `)`
	var rows []memoryRow
	if err := s.rdb.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	out := make([]Memory, 0, len(rows))
	for _, r := range rows {
		m := r.memory()
		key, text := strings.ToLower(m.Key), strings.ToLower(m.Text)
		for _, w := range words {
			if strings.Contains(key, w) {
				m.Score += 3
			}
			m.Score += min(strings.Count(text, w), 5)
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].UpdatedAt.After(out[j].UpdatedAt)
	})
	return out[:min(len(out), limit)], nil
}

// queryWords splits a query into distinct lower-case words of letters and
// digits, at least two characters long, at most MaxMemoryQueryWords.
func queryWords(q string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if utf8.RuneCountInString(w) < 2 || seen[w] || stopWords[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == MaxMemoryQueryWords {
			break
		}
	}
	return out
}

// stopWords match nearly every text; they do not help a search.
var stopWords = map[string]bool{"the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "a": true,
	"an": true, "is": true, "it": true, "on": true, "for": true, "with": true, "be": true, "this": true, "that": true}

// DeleteMemory deletes one of userID's memories (another user's is not_found).
func (s *Store) DeleteMemory(ctx context.Context, userID, id string) error {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM memories WHERE id = ? AND user_id = ?`, id, userID)
	if res.Error != nil {
		return fmt.Errorf("delete memory: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return store.NotFound("memory", id)
	}
	return nil
}

// GetMemory returns one of userID's memories.
func (s *Store) GetMemory(ctx context.Context, userID, id string) (Memory, error) {
	var r memoryRow
	err := s.rsql.QueryRowContext(ctx, `SELECT `+memoryCols+` FROM memories WHERE id = ? AND user_id = ?`, id, userID).
		Scan(&r.ID, &r.Repo, &r.Key, &r.Value, &r.SessionID, &r.NodeID, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Memory{}, store.NotFound("memory", id)
	}
	if err != nil {
		return Memory{}, fmt.Errorf("read memory: %w", err)
	}
	return r.memory(), nil
}
