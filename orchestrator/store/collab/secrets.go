package collab

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// SecretsKeySize is the length of the server's secrets key (AES-256).
const SecretsKeySize = 32

// MaxSecretLen bounds a secret's value, in bytes.
const MaxSecretLen = 4096

// SecretInfo describes one secret of a session: never its value.
type SecretInfo struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// secretAEAD is the cipher sealing session secrets, or an error saying no
// key is configured.
func (s *Store) secretAEAD() (cipher.AEAD, error) {
	if len(s.cfg.SecretsKey) != SecretsKeySize {
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "this server has no secrets key, so it cannot keep vendor keys (filepath serve makes one in its data directory)")
	}
	b, err := aes.NewCipher(s.cfg.SecretsKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// secretAD binds a sealed value to its session and name: a value copied to
// another row does not open.
func secretAD(sessionID, name string) []byte { return []byte(sessionID + "\x00" + name) }

// validSecret checks a secret's name (a vendor key of the catalog) and value.
func validSecret(name, value string) error {
	if !slices.Contains(orchestrator.VendorKeys(), name) {
		return orchestrator.FieldErrorf("name", "secret %q is not a vendor key an agent needs: want one of %s", name, strings.Join(orchestrator.VendorKeys(), ", "))
	}
	switch v := strings.TrimSpace(value); {
	case v == "":
		return orchestrator.FieldErrorf("value", "the value of %s must not be empty", name)
	case len(value) > MaxSecretLen:
		return orchestrator.FieldErrorf("value", "the value of %s is longer than %d bytes", name, MaxSecretLen)
	case strings.ContainsAny(value, "\x00\r\n"):
		return orchestrator.FieldErrorf("value", "the value of %s must be one line", name)
	}
	return nil
}

// SetSessionSecret stores value as the secret name of userID's session,
// sealed with the secrets key, replacing an earlier value.
func (s *Store) SetSessionSecret(ctx context.Context, userID, sessionID, name, value string) (SecretInfo, error) {
	if _, err := s.sessions.GetSession(ctx, userID, sessionID); err != nil {
		return SecretInfo{}, err
	}
	if err := validSecret(name, value); err != nil {
		return SecretInfo{}, err
	}
	aead, err := s.secretAEAD()
	if err != nil {
		return SecretInfo{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return SecretInfo{}, err
	}
	sealed := aead.Seal(nonce, nonce, []byte(value), secretAD(sessionID, name))
	now := store.Millis(s.now())
	err = s.db.WithContext(ctx).Exec(`INSERT INTO session_secrets (session_id, name, value, created_at, updated_at) VALUES (?,?,?,?,?)
		ON CONFLICT (session_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		sessionID, name, sealed, now, now).Error
	if err != nil {
		return SecretInfo{}, fmt.Errorf("store secret: %w", err)
	}
	infos, err := s.SessionSecrets(ctx, userID, sessionID)
	if err != nil {
		return SecretInfo{}, err
	}
	for _, in := range infos {
		if in.Name == name {
			return in, nil
		}
	}
	return SecretInfo{}, store.NotFound("session", sessionID) // deleted meanwhile
}

// SessionSecrets lists the secrets of userID's session by name, without
// their values.
func (s *Store) SessionSecrets(ctx context.Context, userID, sessionID string) ([]SecretInfo, error) {
	if _, err := s.sessions.GetSession(ctx, userID, sessionID); err != nil {
		return nil, err
	}
	var rows []struct {
		Name                 string
		CreatedAt, UpdatedAt int64
	}
	if err := s.rdb.WithContext(ctx).Raw(`SELECT name, created_at, updated_at FROM session_secrets WHERE session_id = ? ORDER BY name`, sessionID).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]SecretInfo, len(rows))
	for i, r := range rows {
		out[i] = SecretInfo{Name: r.Name, CreatedAt: store.FromMillis(r.CreatedAt), UpdatedAt: store.FromMillis(r.UpdatedAt)}
	}
	return out, nil
}

// DeleteSessionSecret removes a secret of userID's session; ENotFound when
// the session has none of that name.
func (s *Store) DeleteSessionSecret(ctx context.Context, userID, sessionID, name string) error {
	if _, err := s.sessions.GetSession(ctx, userID, sessionID); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Exec(`DELETE FROM session_secrets WHERE session_id = ? AND name = ?`, sessionID, name)
	if res.Error != nil {
		return fmt.Errorf("delete secret: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return orchestrator.Errorf(orchestrator.ENotFound, "session %s has no secret %s", sessionID, name)
	}
	return nil
}

// OpenSessionSecret returns the value of a session's secret, for the
// runner to put into a container's environment (and nowhere else);
// ENotFound when the session has none of that name.
func (s *Store) OpenSessionSecret(ctx context.Context, sessionID, name string) (string, error) {
	var rows []struct{ Value []byte }
	if err := s.rdb.WithContext(ctx).Raw(`SELECT value FROM session_secrets WHERE session_id = ? AND name = ?`, sessionID, name).Scan(&rows).Error; err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	if len(rows) == 0 {
		return "", orchestrator.Errorf(orchestrator.ENotFound, "session %s has no secret %s", sessionID, name)
	}
	aead, err := s.secretAEAD()
	if err != nil {
		return "", err
	}
	v := rows[0].Value
	if len(v) < aead.NonceSize() {
		return "", fmt.Errorf("secret %s of session %s is damaged", name, sessionID)
	}
	plain, err := aead.Open(nil, v[:aead.NonceSize()], v[aead.NonceSize():], secretAD(sessionID, name))
	if err != nil {
		return "", orchestrator.Errorf(orchestrator.EUnavailable, "secret %s of session %s does not open with this server's secrets key (was the key replaced?): set it again", name, sessionID)
	}
	return string(plain), nil
}
