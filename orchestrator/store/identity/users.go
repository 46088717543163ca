// Package identity keeps who is who: users, their single-use login links,
// browser sessions and API keys (a user's, or a node's: the token of one
// agent's container). Every secret is stored as its sha256.
//
//	New(*store.Store) *Store
//	CreateUser(ctx, name, admin) (User, error)   // conflict on a taken name
//	UserByName(ctx, name); UserByID(ctx, id) (User, error); ListUsers(ctx); CountUsers(ctx) (int, error)
//	CreateLoginToken(ctx, userID, ttl) (token string, err)   // single use
//	ConsumeLoginToken(ctx, token) (User, error)               // unauthorized when used/expired/unknown
//	CreateAPIKey(ctx, userID, name) (key string, APIKey, error)   // "fp_…", shown once
//	CreateAPIKeyExpiring(ctx, userID, name, expiresAt) (key string, APIKey, error) // AuthAPIKey refuses it from expiresAt on (*APIKeyExpiredError)
//	CreateNodeAPIKey(ctx, userID, sessionID, nodeID) (key string, APIKey, error); DeleteNodeAPIKeys(ctx, nodeID)
//	AuthAPIKey(ctx, key) (Principal{User, SessionID, NodeID}, error)
//	UserByAPIKey(ctx, key) (User, error)   // user keys only; node keys → unauthorized
//	ListAPIKeys(ctx, userID) ([]APIKey, error); DeleteAPIKey(ctx, userID, keyID) error
//	CreateWebSession(ctx, userID, ttl) (cookie string, err); UserByWebSession(ctx, cookie) (User, error)
//	DeleteWebSession(ctx, cookie) error; DeleteWebSessionsOf(ctx, userID); DeleteExpired(ctx) (int64, error)
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// Store keeps users and their credentials in the store's database.
type Store struct {
	st  *store.Store
	db  *gorm.DB // the write connection
	rdb *gorm.DB // the read pool
}

// New returns the users kept in st.
func New(st *store.Store) *Store { return &Store{st: st, db: st.DB(), rdb: st.ReadDB()} }

func (s *Store) now() time.Time { return s.st.Now() }

// User is an account.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	IsAdmin   bool      `json:"is_admin"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey describes a stored key (never the key itself).
type APIKey struct {
	ID         string     `json:"id"`
	UserID     string     `json:"user_id"`
	SessionID  string     `json:"session_id,omitempty"` // set for node keys
	NodeID     string     `json:"node_id,omitempty"`    // set for node keys
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"` // the first characters of the key, for display
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // nil: never (node keys, and keys made without an expiry)
}

// Principal is who an API key authenticates: a user, or, for a node key,
// one node of one of the user's sessions (DESIGN invariant 9).
type Principal struct {
	User      User
	SessionID string // "" for a user key
	NodeID    string // "" for a user key
}

// APIKeyPrefix starts every API key.
const APIKeyPrefix = "fp_"

// apiKeyUseResolution bounds how often last_used_at is written for a key.
const apiKeyUseResolution = time.Minute

var userNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

type userRow struct {
	ID        string
	Name      string
	IsAdmin   bool
	CreatedAt int64
}

func (r userRow) user() User {
	return User{ID: r.ID, Name: r.Name, IsAdmin: r.IsAdmin, CreatedAt: store.FromMillis(r.CreatedAt)}
}

// randomSecret returns n random bytes, base64url without padding.
func randomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func errUnauthorized(what string) error {
	return orchestrator.Errorf(orchestrator.EUnauthorized, "%s is invalid or expired", what)
}

// CreateUser creates a user. name is 1-64 of [a-zA-Z0-9._-], starting with a
// letter or digit, unique (conflict otherwise).
func (s *Store) CreateUser(ctx context.Context, name string, admin bool) (User, error) {
	if !userNameRE.MatchString(name) {
		return User{}, orchestrator.FieldErrorf("name", "user name %q: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	r := userRow{ID: store.NewID(), Name: name, IsAdmin: admin, CreatedAt: store.Millis(s.now())}
	err := s.db.WithContext(ctx).Exec(`INSERT INTO users (id, name, is_admin, created_at) VALUES (?, ?, ?, ?)`,
		r.ID, r.Name, r.IsAdmin, r.CreatedAt).Error
	if store.IsConstraint(err, sqlite3.ErrConstraintUnique) {
		return User{}, &orchestrator.Error{Code: orchestrator.EConflict, Field: "name", Message: fmt.Sprintf("user %q already exists", name)}
	}
	if err != nil {
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return r.user(), nil
}

func (s *Store) userWhere(ctx context.Context, what, q string, arg any) (User, error) {
	var rows []userRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT id, name, is_admin, created_at FROM users WHERE `+q, arg).
		Scan(&rows).Error; err != nil {
		return User{}, fmt.Errorf("read user: %w", err)
	}
	if len(rows) == 0 {
		return User{}, store.NotFound("user", what)
	}
	return rows[0].user(), nil
}

// UserByName returns the user called name.
func (s *Store) UserByName(ctx context.Context, name string) (User, error) {
	return s.userWhere(ctx, name, `name = ?`, name)
}

// UserByID returns the user with id.
func (s *Store) UserByID(ctx context.Context, id string) (User, error) {
	return s.userWhere(ctx, id, `id = ?`, id)
}

// ListUsers returns every user, oldest first.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	var rows []userRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT id, name, is_admin, created_at FROM users ORDER BY created_at, name`).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := make([]User, len(rows))
	for i, r := range rows {
		out[i] = r.user()
	}
	return out, nil
}

// CountUsers returns the number of users.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.rdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM users`).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return orchestrator.FieldErrorf("ttl", "ttl must be positive, got %s", ttl)
	}
	return nil
}

// CreateLoginToken returns a single-use login token for userID, valid for
// ttl. Only its hash is stored.
func (s *Store) CreateLoginToken(ctx context.Context, userID string, ttl time.Duration) (string, error) {
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	token := randomSecret(32)
	now := s.now()
	err := s.db.WithContext(ctx).Exec(`INSERT INTO login_tokens (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		hashSecret(token), userID, store.Millis(now), store.Millis(now.Add(ttl))).Error
	if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
		return "", store.NotFound("user", userID)
	}
	if err != nil {
		return "", fmt.Errorf("create login token: %w", err)
	}
	return token, nil
}

// ConsumeLoginToken marks token used and returns its user. A token works
// once, before it expires; otherwise unauthorized.
func (s *Store) ConsumeLoginToken(ctx context.Context, token string) (User, error) {
	var userID string
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		now := store.Millis(s.now())
		var ids []string
		if err := g.Raw(`UPDATE login_tokens SET used_at = ? WHERE hash = ? AND used_at IS NULL AND expires_at > ? RETURNING user_id`,
			now, hashSecret(token), now).Scan(&ids).Error; err != nil {
			return fmt.Errorf("consume login token: %w", err)
		}
		if len(ids) == 0 {
			return errUnauthorized("login token")
		}
		userID = ids[0]
		return nil
	})
	if err != nil {
		return User{}, err
	}
	return s.UserByID(ctx, userID)
}

// CreateAPIKey returns a new API key for userID: "fp_" and 43 random
// characters. It is shown only now; the store keeps its sha256. It never
// expires; it works until it is deleted.
func (s *Store) CreateAPIKey(ctx context.Context, userID, name string) (string, APIKey, error) {
	return s.createAPIKey(ctx, userID, name, nil, nil, nil)
}

// CreateAPIKeyExpiring is CreateAPIKey for a key that stops authenticating
// at expiresAt (AuthAPIKey then answers an *APIKeyExpiredError). expiresAt
// must be after the store's clock reads now.
func (s *Store) CreateAPIKeyExpiring(ctx context.Context, userID, name string, expiresAt time.Time) (string, APIKey, error) {
	if now := s.now(); !expiresAt.After(now) {
		return "", APIKey{}, orchestrator.FieldErrorf("expires_at", "key expiry %s is not in the future (now is %s)",
			expiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return s.createAPIKey(ctx, userID, name, nil, nil, &expiresAt)
}

// CreateNodeAPIKey returns a key for the container of one node of userID's
// session. It authenticates only as that node (Principal.NodeID) and is
// deleted with the node.
func (s *Store) CreateNodeAPIKey(ctx context.Context, userID, sessionID, nodeID string) (string, APIKey, error) {
	var n int64
	if err := s.rdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM agent_node n JOIN agent_session s ON s.id = n.session_id
		WHERE n.id = ? AND n.session_id = ? AND s.user_id = ?`, nodeID, sessionID, store.RequireUser(userID)).Scan(&n).Error; err != nil {
		return "", APIKey{}, fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if n == 0 {
		return "", APIKey{}, store.NotFound("node", nodeID)
	}
	return s.createAPIKey(ctx, userID, "node "+nodeID, &sessionID, &nodeID, nil)
}

func (s *Store) createAPIKey(ctx context.Context, userID, name string, sessionID, nodeID *string, expiresAt *time.Time) (string, APIKey, error) {
	name = strings.TrimSpace(name)
	if len(name) > 200 {
		return "", APIKey{}, orchestrator.FieldErrorf("name", "key name is longer than 200 bytes")
	}
	key := APIKeyPrefix + randomSecret(32)
	k := APIKey{ID: store.NewID(), UserID: userID, Name: name, Prefix: key[:len(APIKeyPrefix)+6], CreatedAt: store.FromMillis(store.Millis(s.now()))}
	if sessionID != nil {
		k.SessionID, k.NodeID = *sessionID, *nodeID
	}
	var expMS *int64
	if expiresAt != nil {
		e := store.Millis(*expiresAt)
		expMS, k.ExpiresAt = &e, store.FromMillisPtr(&e)
	}
	err := s.db.WithContext(ctx).Exec(`INSERT INTO api_keys (id, user_id, session_id, node_id, name, hash, prefix, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.ID, userID, sessionID, nodeID, name, hashSecret(key), k.Prefix, store.Millis(k.CreatedAt), expMS).Error
	if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
		return "", APIKey{}, store.NotFound("user", userID)
	}
	if err != nil {
		return "", APIKey{}, fmt.Errorf("create api key: %w", err)
	}
	return key, k, nil
}

// APIKeyExpiredError is AuthAPIKey's answer for a key past its expiry. It
// is unauthorized (ErrorCode), like an unknown key; only the holder of the
// key itself can get it, so it tells nothing of other keys.
type APIKeyExpiredError struct {
	ExpiresAt time.Time
}

func (e *APIKeyExpiredError) Error() string {
	return "API key expired at " + e.ExpiresAt.UTC().Format(time.RFC3339)
}

// ErrorCode makes it an unauthorized error for orchestrator.ErrorCode.
func (e *APIKeyExpiredError) ErrorCode() string { return orchestrator.EUnauthorized }

// ErrorField is empty: the error is about no request field.
func (e *APIKeyExpiredError) ErrorField() string { return "" }

// AuthAPIKey returns who key authenticates: a user, or one node (node keys).
// An unknown key is unauthorized; a key past its expiry is an
// *APIKeyExpiredError (unauthorized too) and its use is not recorded.
func (s *Store) AuthAPIKey(ctx context.Context, key string) (Principal, error) {
	if !strings.HasPrefix(key, APIKeyPrefix) {
		return Principal{}, errUnauthorized("api key")
	}
	var rows []struct {
		KeyID      string
		SessionID  *string
		NodeID     *string
		LastUsedAt *int64
		ExpiresAt  *int64
		UserID     string
		UserName   string
		IsAdmin    bool
		CreatedAt  int64
	}
	if err := s.rdb.WithContext(ctx).Raw(`SELECT k.id AS key_id, k.session_id, k.node_id, k.last_used_at, k.expires_at,
		u.id AS user_id, u.name AS user_name, u.is_admin, u.created_at
		FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.hash = ?`, hashSecret(key)).Scan(&rows).Error; err != nil {
		return Principal{}, fmt.Errorf("read api key: %w", err)
	}
	if len(rows) == 0 {
		return Principal{}, errUnauthorized("api key")
	}
	r := rows[0]
	now := s.now()
	if r.ExpiresAt != nil && store.Millis(now) >= *r.ExpiresAt {
		return Principal{}, &APIKeyExpiredError{ExpiresAt: store.FromMillis(*r.ExpiresAt)}
	}
	if r.LastUsedAt == nil || now.Sub(store.FromMillis(*r.LastUsedAt)) >= apiKeyUseResolution {
		if err := s.db.WithContext(ctx).Exec(`UPDATE api_keys SET last_used_at = ? WHERE id = ?`, store.Millis(now), r.KeyID).Error; err != nil {
			return Principal{}, fmt.Errorf("record api key use: %w", err)
		}
	}
	p := Principal{User: userRow{ID: r.UserID, Name: r.UserName, IsAdmin: r.IsAdmin, CreatedAt: r.CreatedAt}.user()}
	if r.NodeID != nil {
		p.SessionID, p.NodeID = deref(r.SessionID), *r.NodeID
	}
	return p, nil
}

// UserByAPIKey returns the user of a user API key. Node keys are refused
// (unauthorized): they must go through AuthAPIKey, which tells their scope.
func (s *Store) UserByAPIKey(ctx context.Context, key string) (User, error) {
	p, err := s.AuthAPIKey(ctx, key)
	if err != nil {
		return User{}, err
	}
	if p.NodeID != "" {
		return User{}, orchestrator.Errorf(orchestrator.EUnauthorized, "api key belongs to a node and cannot act as the user")
	}
	return p.User, nil
}

// ListAPIKeys returns userID's keys (user and node keys), newest first.
func (s *Store) ListAPIKeys(ctx context.Context, userID string) ([]APIKey, error) {
	var rows []struct {
		ID, UserID, Name, Prefix string
		SessionID, NodeID        *string
		CreatedAt                int64
		LastUsedAt, ExpiresAt    *int64
	}
	if err := s.rdb.WithContext(ctx).Raw(`SELECT id, user_id, session_id, node_id, name, prefix, created_at, last_used_at, expires_at
		FROM api_keys WHERE user_id = ? ORDER BY created_at DESC, id`, store.RequireUser(userID)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = APIKey{ID: r.ID, UserID: r.UserID, SessionID: deref(r.SessionID), NodeID: deref(r.NodeID),
			Name: r.Name, Prefix: r.Prefix, CreatedAt: store.FromMillis(r.CreatedAt), LastUsedAt: store.FromMillisPtr(r.LastUsedAt),
			ExpiresAt: store.FromMillisPtr(r.ExpiresAt)}
	}
	return out, nil
}

// DeleteAPIKey deletes one of userID's keys.
func (s *Store) DeleteAPIKey(ctx context.Context, userID, keyID string) error {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM api_keys WHERE id = ? AND user_id = ?`, keyID, store.RequireUser(userID))
	if res.Error != nil {
		return fmt.Errorf("delete api key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return store.NotFound("api key", keyID)
	}
	return nil
}

// DeleteNodeAPIKeys deletes every key of nodeID (its container's token) and
// returns how many went: a node's token dies with its container (DESIGN
// invariant 9). Deleting the keys of a node that has none is not an error.
func (s *Store) DeleteNodeAPIKeys(ctx context.Context, nodeID string) (int64, error) {
	if nodeID == "" {
		return 0, orchestrator.FieldErrorf("node_id", "node id is empty")
	}
	res := s.db.WithContext(ctx).Exec(`DELETE FROM api_keys WHERE node_id = ?`, nodeID)
	if res.Error != nil {
		return 0, fmt.Errorf("delete api keys of node %s: %w", nodeID, res.Error)
	}
	return res.RowsAffected, nil
}

// CreateWebSession returns a new browser session cookie value for userID,
// valid for ttl. Only its hash is stored.
func (s *Store) CreateWebSession(ctx context.Context, userID string, ttl time.Duration) (string, error) {
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	cookie := randomSecret(32)
	now := s.now()
	err := s.db.WithContext(ctx).Exec(`INSERT INTO web_sessions (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		hashSecret(cookie), userID, store.Millis(now), store.Millis(now.Add(ttl))).Error
	if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
		return "", store.NotFound("user", userID)
	}
	if err != nil {
		return "", fmt.Errorf("create web session: %w", err)
	}
	return cookie, nil
}

// UserByWebSession returns the user of an unexpired session cookie value;
// otherwise unauthorized.
func (s *Store) UserByWebSession(ctx context.Context, cookie string) (User, error) {
	var rows []userRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT u.id, u.name, u.is_admin, u.created_at
		FROM web_sessions w JOIN users u ON u.id = w.user_id WHERE w.hash = ? AND w.expires_at > ?`,
		hashSecret(cookie), store.Millis(s.now())).Scan(&rows).Error; err != nil {
		return User{}, fmt.Errorf("read web session: %w", err)
	}
	if len(rows) == 0 {
		return User{}, errUnauthorized("session cookie")
	}
	return rows[0].user(), nil
}

// DeleteWebSession ends a browser session (logout). Unknown values are fine.
func (s *Store) DeleteWebSession(ctx context.Context, cookie string) error {
	if err := s.db.WithContext(ctx).Exec(`DELETE FROM web_sessions WHERE hash = ?`, hashSecret(cookie)).Error; err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	return nil
}

// DeleteWebSessionsOf ends every browser session of userID (logout
// everywhere) and returns how many there were.
func (s *Store) DeleteWebSessionsOf(ctx context.Context, userID string) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM web_sessions WHERE user_id = ?`, store.RequireUser(userID))
	if res.Error != nil {
		return 0, fmt.Errorf("delete web sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// DeleteExpired removes expired login tokens and web sessions and returns
// how many rows went.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	now := store.Millis(s.now())
	var total int64
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		for _, q := range []string{`DELETE FROM login_tokens WHERE expires_at <= ?`, `DELETE FROM web_sessions WHERE expires_at <= ?`} {
			res := g.Exec(q, now)
			if res.Error != nil {
				return res.Error
			}
			total += res.RowsAffected
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired credentials: %w", err)
	}
	return total, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// hashSecret returns the hex sha256 of a secret (tokens, keys, cookies): the
// database never holds a usable credential.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
