package secrets

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// KnownHost is the SSH host key pinned for one remote of a user.
type KnownHost struct {
	// Host is host:port as the remote's URL names it.
	Host    string `json:"host"`
	KeyType string `json:"key_type"`
	// PublicKey is the key in authorized_keys form.
	PublicKey string `json:"public_key"`
	// Fingerprint is the key's SHA256 fingerprint as ssh-keygen -l shows it.
	Fingerprint string    `json:"fingerprint"`
	CreatedAt   time.Time `json:"created_at"`
}

// Key parses the pinned key.
func (k KnownHost) Key() (ssh.PublicKey, error) {
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
	return pk, err
}

type hostRow struct {
	Host        string
	KeyType     string
	PublicKey   string
	Fingerprint string
	CreatedAt   int64
}

func (r hostRow) known() KnownHost {
	return KnownHost{Host: r.Host, KeyType: r.KeyType, PublicKey: r.PublicKey, Fingerprint: r.Fingerprint, CreatedAt: store.FromMillis(r.CreatedAt)}
}

// HostKey returns the key pinned for host (host:port) by userID; ok is
// false when none is.
func (s *Store) HostKey(ctx context.Context, userID, host string) (KnownHost, bool, error) {
	var rows []hostRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT host, key_type, public_key, fingerprint, created_at FROM known_hosts WHERE user_id = ? AND host = ?`,
		store.RequireUser(userID), strings.ToLower(host)).Scan(&rows).Error; err != nil {
		return KnownHost{}, false, fmt.Errorf("read known host: %w", err)
	}
	if len(rows) == 0 {
		return KnownHost{}, false, nil
	}
	return rows[0].known(), true, nil
}

// TrustHostKey pins key for host (host:port) of userID. A host pinned to
// another key stays pinned to it: the user deletes that pin first.
func (s *Store) TrustHostKey(ctx context.Context, userID, host string, key ssh.PublicKey) (KnownHost, error) {
	host = strings.ToLower(strings.TrimSpace(host))
	if host == "" || len(host) > MaxHostLen+6 {
		return KnownHost{}, orchestrator.FieldErrorf("host", "host must be host:port")
	}
	k := KnownHost{Host: host, KeyType: key.Type(), PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))),
		Fingerprint: ssh.FingerprintSHA256(key), CreatedAt: store.FromMillis(store.Millis(s.st.Now()))}
	res := s.db.WithContext(ctx).Exec(`INSERT INTO known_hosts (user_id, host, key_type, public_key, fingerprint, created_at) VALUES (?,?,?,?,?,?)
		ON CONFLICT (user_id, host) DO NOTHING`, store.RequireUser(userID), host, k.KeyType, k.PublicKey, k.Fingerprint, store.Millis(k.CreatedAt))
	if res.Error != nil {
		return KnownHost{}, fmt.Errorf("pin host key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		old, ok, err := s.HostKey(ctx, userID, host)
		if err != nil {
			return KnownHost{}, err
		}
		if ok && old.PublicKey != k.PublicKey {
			return old, orchestrator.Errorf(orchestrator.EConflict, "%s is pinned to another key (%s): delete that pin in Settings first if the host's key really changed", host, old.Fingerprint)
		}
		return old, nil
	}
	return k, nil
}

// KnownHosts lists the hosts userID pinned, by host.
func (s *Store) KnownHosts(ctx context.Context, userID string) ([]KnownHost, error) {
	var rows []hostRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT host, key_type, public_key, fingerprint, created_at FROM known_hosts WHERE user_id = ? ORDER BY host`,
		store.RequireUser(userID)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list known hosts: %w", err)
	}
	out := make([]KnownHost, len(rows))
	for i, r := range rows {
		out[i] = r.known()
	}
	return out, nil
}

// DeleteKnownHost removes userID's pin of host; ENotFound when there is none.
func (s *Store) DeleteKnownHost(ctx context.Context, userID, host string) error {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM known_hosts WHERE user_id = ? AND host = ?`, store.RequireUser(userID), strings.ToLower(host))
	if res.Error != nil {
		return fmt.Errorf("delete known host: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return orchestrator.Errorf(orchestrator.ENotFound, "no host key pinned for %s", host)
	}
	return nil
}
