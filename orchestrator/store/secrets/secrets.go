// Package secrets keeps each user's secrets, and each session's that
// override them: vendor keys of agents that run on their vendor's service,
// git credentials over HTTPS, SSH private keys, GitHub and GitLab tokens;
// and the SSH host keys pinned per remote. A value is sealed with the
// server's key (AES-256-GCM) before it reaches the database, and is opened
// only for the one use that needs it (a container's environment, a push, a
// forge call): listings carry names, kinds, hosts and dates, never a value.
//
//	New(*store.Store, Config{Key}) *Store
//
//	Set(ctx, userID, sessionID, name, NewSecret{Kind, Value, Host, Username}) (Info, error)   // sessionID "": the user's
//	List(ctx, userID, sessionID) ([]Info, error)   // "": the user's; else the session's own and the user's it does not override
//	Delete(ctx, userID, sessionID, name) error
//	Open(ctx, userID, sessionID, name) (Secret, error)   // the session's first, then the user's
//	OpenForSession(ctx, sessionID, name) (Secret, error) // the same as the session's owner (the runner)
//	Has(ctx, userID, sessionID, name) (bool, error)
//
//	HostKey(ctx, userID, host) (KnownHost, bool, error); TrustHostKey(ctx, userID, host, ssh.PublicKey) (KnownHost, error)
//	KnownHosts(ctx, userID) ([]KnownHost, error); DeleteKnownHost(ctx, userID, host) error
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"golang.org/x/crypto/ssh"
	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// KeySize is the length of the server's secrets key (AES-256).
const KeySize = 32

// Bounds of a secret.
const (
	MaxValueLen  = 4096     // bytes of a one-line value
	MaxSSHKeyLen = 16 << 10 // bytes of an SSH private key
	MaxNameLen   = 64
	MaxHostLen   = 255
	MaxUserLen   = 255
)

// Kinds of secret.
const (
	// KindVendor is a vendor key an agent needs in its environment (its
	// name is the variable, e.g. AMP_API_KEY).
	KindVendor = "vendor"
	// KindGitHTTPS is a password or token for git over HTTPS, with its
	// username.
	KindGitHTTPS = "git_https"
	// KindGitSSH is an SSH private key (PEM or OpenSSH form, unencrypted).
	KindGitSSH = "git_ssh"
	// KindGitHubToken and KindGitLabToken are forge tokens: for the
	// forge's REST API (pull and merge requests), and for git over HTTPS
	// to its host.
	KindGitHubToken = "github_token"
	KindGitLabToken = "gitlab_token"
)

// Kinds lists every kind.
func Kinds() []string {
	return []string{KindVendor, KindGitHTTPS, KindGitSSH, KindGitHubToken, KindGitLabToken}
}

// Scopes of a secret (Info.Scope).
const (
	ScopeUser    = "user"    // every session of the user
	ScopeSession = "session" // one session, over the user's of the same name
)

// Config configures New.
type Config struct {
	// Key (KeySize bytes) seals the values; nil: secrets can be neither
	// stored nor opened.
	Key []byte
}

// Store keeps secrets and known hosts in the store's database. It is safe
// for concurrent use.
type Store struct {
	st  *store.Store
	cfg Config
	db  *gorm.DB // the write connection
	rdb *gorm.DB // the read pool
}

// New returns the secrets kept in st.
func New(st *store.Store, cfg Config) *Store {
	return &Store{st: st, cfg: cfg, db: st.DB(), rdb: st.ReadDB()}
}

// Info describes a secret: never its value.
type Info struct {
	Name  string `json:"name"`
	Kind  string `json:"kind" jsonschema:"enum=vendor,enum=git_https,enum=git_ssh,enum=github_token,enum=gitlab_token"`
	Scope string `json:"scope" jsonschema:"enum=user,enum=session"`
	// SessionID is the session of a session secret.
	SessionID string `json:"session_id,omitempty"`
	// Host is the host the credential is for (e.g. github.com); "" : any.
	Host string `json:"host,omitempty"`
	// Username is an HTTPS credential's user name.
	Username string `json:"username,omitempty"`
	// PublicKey is an SSH key's public half (authorized_keys form), to
	// give the forge (a deploy key).
	PublicKey string     `json:"public_key,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
}

// Secret is an opened secret: its Info and its value. It is for the one use
// that needs it and is never logged, recorded or answered.
type Secret struct {
	Info
	Value string `json:"-"`
}

// String hides the value from fmt.
func (s Secret) String() string { return fmt.Sprintf("secret %s (%s)", s.Name, s.Kind) }

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// NewSecret is the input of Set.
type NewSecret struct {
	Kind     string
	Value    string
	Host     string
	Username string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// valid checks and normalises a secret; it returns the SSH key's public
// half for KindGitSSH.
func valid(name string, in *NewSecret) (pub string, err error) {
	in.Kind, in.Host, in.Username = strings.TrimSpace(in.Kind), strings.ToLower(strings.TrimSpace(in.Host)), strings.TrimSpace(in.Username)
	if in.Kind == "" && slices.Contains(orchestrator.VendorKeys(), name) {
		in.Kind = KindVendor
	}
	switch {
	case !slices.Contains(Kinds(), in.Kind):
		return "", orchestrator.FieldErrorf("kind", "kind %q: want one of %s", in.Kind, strings.Join(Kinds(), ", "))
	case in.Kind == KindVendor && !slices.Contains(orchestrator.VendorKeys(), name):
		return "", orchestrator.FieldErrorf("name", "secret %q is not a vendor key an agent needs: want one of %s", name, strings.Join(orchestrator.VendorKeys(), ", "))
	case len(name) > MaxNameLen || !nameRE.MatchString(name):
		return "", orchestrator.FieldErrorf("name", "a secret's name is letters, digits, '_', '.' and '-' (at most %d, not starting with a sign), not %q", MaxNameLen, name)
	case len(in.Host) > MaxHostLen || strings.ContainsAny(in.Host, "/@ \t\r\n\x00"):
		return "", orchestrator.FieldErrorf("host", "host is a host name, optionally with :port (e.g. github.com), not %q", in.Host)
	case len(in.Username) > MaxUserLen || strings.ContainsAny(in.Username, ":\r\n\x00"):
		return "", orchestrator.FieldErrorf("username", "username must be one line of at most %d bytes without ':'", MaxUserLen)
	case in.Username != "" && in.Kind != KindGitHTTPS && in.Kind != KindGitHubToken && in.Kind != KindGitLabToken:
		return "", orchestrator.FieldErrorf("username", "only an HTTPS credential or a forge token has a username")
	case strings.TrimSpace(in.Value) == "":
		return "", orchestrator.FieldErrorf("value", "the value of %s must not be empty", name)
	}
	if in.Kind == KindGitSSH {
		if len(in.Value) > MaxSSHKeyLen {
			return "", orchestrator.FieldErrorf("value", "the SSH key %s is longer than %d bytes", name, MaxSSHKeyLen)
		}
		signer, err := ssh.ParsePrivateKey([]byte(in.Value))
		var pp *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pp):
			return "", orchestrator.FieldErrorf("value", "the SSH key %s is protected by a passphrase: give it without one (ssh-keygen -p -N '' -f KEY on a copy)", name)
		case err != nil:
			return "", orchestrator.FieldErrorf("value", "the value of %s is not an SSH private key (PEM or OpenSSH form)", name)
		}
		return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), nil
	}
	switch {
	case len(in.Value) > MaxValueLen:
		return "", orchestrator.FieldErrorf("value", "the value of %s is longer than %d bytes", name, MaxValueLen)
	case strings.ContainsAny(in.Value, "\x00\r\n"):
		return "", orchestrator.FieldErrorf("value", "the value of %s must be one line", name)
	}
	return "", nil
}

// aead is the cipher sealing values, or an error saying no key is
// configured.
func (s *Store) aead() (cipher.AEAD, error) {
	if len(s.cfg.Key) != KeySize {
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "this server has no secrets key, so it cannot keep secrets (filepath serve makes one in its data directory)")
	}
	b, err := aes.NewCipher(s.cfg.Key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// additional binds a sealed value to its row: its user, session and name
// (sealedWith 1), or its session and name (0: a session secret of 0011).
func additional(sealedWith int, userID, sessionID, name string) []byte {
	if sealedWith == 0 {
		return []byte(sessionID + "\x00" + name)
	}
	return []byte(userID + "\x00" + sessionID + "\x00" + name)
}

// owned checks that sessionID ("" : none) is userID's.
func owned(g *gorm.DB, userID, sessionID string) error {
	if sessionID == "" {
		return nil
	}
	return sessions.CheckOwner(g, userID, sessionID)
}

// nullable is sessionID as the session_id column holds it.
func nullable(sessionID string) *string {
	if sessionID == "" {
		return nil
	}
	return &sessionID
}

// Set stores a secret of userID (sessionID "": the user's, for every
// session; else that session's, over the user's of the same name), sealed,
// replacing the value (a rotation) and the rest of an earlier one.
func (s *Store) Set(ctx context.Context, userID, sessionID, name string, in NewSecret) (Info, error) {
	userID = store.RequireUser(userID)
	if err := owned(s.rdb.WithContext(ctx), userID, sessionID); err != nil {
		return Info{}, err
	}
	pub, err := valid(name, &in)
	if err != nil {
		return Info{}, err
	}
	aead, err := s.aead()
	if err != nil {
		return Info{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Info{}, err
	}
	sealed := aead.Seal(nonce, nonce, []byte(in.Value), additional(1, userID, sessionID, name))
	now := store.Millis(s.st.Now())
	err = s.db.WithContext(ctx).Exec(`INSERT INTO secrets (id, user_id, session_id, name, kind, host, username, public_key, value, sealed_with, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,1,?,?)
		ON CONFLICT (user_id, COALESCE(session_id, ''), name) DO UPDATE SET kind = excluded.kind, host = excluded.host,
			username = excluded.username, public_key = excluded.public_key, value = excluded.value, sealed_with = 1,
			updated_at = excluded.updated_at`,
		store.NewID(), userID, nullable(sessionID), name, in.Kind, in.Host, in.Username, pub, sealed, now, now).Error
	if err != nil {
		if store.IsConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return Info{}, store.NotFound("session", sessionID)
		}
		return Info{}, fmt.Errorf("store secret: %w", err)
	}
	rows, err := s.rows(s.db.WithContext(ctx), userID, sessionID, name)
	if err != nil {
		return Info{}, err
	}
	if len(rows) == 0 {
		return Info{}, store.NotFound("session", sessionID) // deleted meanwhile
	}
	return rows[0].info(), nil
}

type row struct {
	ID         string
	UserID     string
	SessionID  *string
	Name       string
	Kind       string
	Host       string
	Username   string
	PublicKey  string
	Value      []byte
	SealedWith int
	CreatedAt  int64
	UpdatedAt  int64
	UsedAt     *int64
}

func (r row) info() Info {
	in := Info{Name: r.Name, Kind: r.Kind, Scope: ScopeUser, Host: r.Host, Username: r.Username, PublicKey: r.PublicKey,
		CreatedAt: store.FromMillis(r.CreatedAt), UpdatedAt: store.FromMillis(r.UpdatedAt), UsedAt: store.FromMillisPtr(r.UsedAt)}
	if r.SessionID != nil {
		in.Scope, in.SessionID = ScopeSession, *r.SessionID
	}
	return in
}

const cols = `id, user_id, session_id, name, kind, host, username, public_key, value, sealed_with, created_at, updated_at, used_at`

// rows reads userID's secrets named name (all with name ""), of the
// session (sessionID != "") and of the user, the session's first.
func (s *Store) rows(g *gorm.DB, userID, sessionID, name string) ([]row, error) {
	q := `SELECT ` + cols + ` FROM secrets WHERE user_id = ? AND (session_id IS NULL OR session_id = ?)`
	args := []any{userID, sessionID}
	if name != "" {
		q += ` AND name = ?`
		args = append(args, name)
	}
	var rows []row
	if err := g.Raw(q+` ORDER BY name, session_id IS NULL`, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	return rows, nil
}

// List lists userID's secrets without their values, by name: with
// sessionID "" the user's; else the session's own and those of the user
// that the session does not override (Info.Scope says which).
func (s *Store) List(ctx context.Context, userID, sessionID string) ([]Info, error) {
	userID = store.RequireUser(userID)
	g := s.rdb.WithContext(ctx)
	if err := owned(g, userID, sessionID); err != nil {
		return nil, err
	}
	rows, err := s.rows(g, userID, sessionID, "")
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Name == r.Name {
			continue // the user's, overridden by the session's before it
		}
		if sessionID == "" && r.SessionID != nil {
			continue
		}
		out = append(out, r.info())
	}
	return out, nil
}

// Has reports whether userID has a secret named name for sessionID (its
// own or the user's).
func (s *Store) Has(ctx context.Context, userID, sessionID, name string) (bool, error) {
	rows, err := s.rows(s.rdb.WithContext(ctx), store.RequireUser(userID), sessionID, name)
	return len(rows) > 0, err
}

// Delete removes a secret of userID (sessionID "": the user's, else the
// session's own); ENotFound when there is none of that name.
func (s *Store) Delete(ctx context.Context, userID, sessionID, name string) error {
	userID = store.RequireUser(userID)
	if err := owned(s.rdb.WithContext(ctx), userID, sessionID); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Exec(`DELETE FROM secrets WHERE user_id = ? AND COALESCE(session_id, '') = ? AND name = ?`, userID, sessionID, name)
	if res.Error != nil {
		return fmt.Errorf("delete secret: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		if sessionID != "" {
			return orchestrator.Errorf(orchestrator.ENotFound, "session %s has no secret %s of its own", sessionID, name)
		}
		return orchestrator.Errorf(orchestrator.ENotFound, "you have no secret %s", name)
	}
	return nil
}

// Open returns userID's secret name for sessionID (the session's own, else
// the user's; sessionID "": the user's) with its value, and notes its use;
// ENotFound when there is none.
func (s *Store) Open(ctx context.Context, userID, sessionID, name string) (Secret, error) {
	userID = store.RequireUser(userID)
	rows, err := s.rows(s.rdb.WithContext(ctx), userID, sessionID, name)
	if err != nil {
		return Secret{}, err
	}
	if len(rows) == 0 || name == "" {
		return Secret{}, orchestrator.Errorf(orchestrator.ENotFound, "no secret %q: add it in Settings (or PUT /api/v1/secrets/%s)", name, name)
	}
	return s.open(ctx, rows[0])
}

// OpenForSession is Open as the owner of sessionID: for the runner, which
// gives a container the vendor key its agent needs.
func (s *Store) OpenForSession(ctx context.Context, sessionID, name string) (Secret, error) {
	var owner []string
	if err := s.rdb.WithContext(ctx).Raw(`SELECT user_id FROM agent_session WHERE id = ?`, sessionID).Scan(&owner).Error; err != nil {
		return Secret{}, fmt.Errorf("read session: %w", err)
	}
	if len(owner) == 0 {
		return Secret{}, store.NotFound("session", sessionID)
	}
	return s.Open(ctx, owner[0], sessionID, name)
}

func (s *Store) open(ctx context.Context, r row) (Secret, error) {
	aead, err := s.aead()
	if err != nil {
		return Secret{}, err
	}
	sid := ""
	if r.SessionID != nil {
		sid = *r.SessionID
	}
	if len(r.Value) < aead.NonceSize() {
		return Secret{}, fmt.Errorf("secret %s is damaged", r.Name)
	}
	plain, err := aead.Open(nil, r.Value[:aead.NonceSize()], r.Value[aead.NonceSize():], additional(r.SealedWith, r.UserID, sid, r.Name))
	if err != nil {
		return Secret{}, orchestrator.Errorf(orchestrator.EUnavailable, "secret %s does not open with this server's secrets key (was the key replaced?): set it again", r.Name)
	}
	now := store.Millis(s.st.Now())
	if err := s.db.WithContext(ctx).Exec(`UPDATE secrets SET used_at = ? WHERE id = ?`, now, r.ID).Error; err != nil {
		return Secret{}, fmt.Errorf("note the use of secret %s: %w", r.Name, err)
	}
	r.UsedAt = &now
	return Secret{Info: r.info(), Value: string(plain)}, nil
}
