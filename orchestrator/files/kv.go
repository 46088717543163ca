package files

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// The session's key-value store (agentfs kv_store): JSON values by key,
// shared by the session's agents and its user, bounded in key length,
// value size and number of keys.

// KVValue is a key and its value.
type KVValue struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value" jsonschema_description:"any JSON value"`
}

func (v KVValue) AuditSummary() any { return map[string]any{"key": v.Key, "bytes": len(v.Value)} }

// KVEntry is a key as kv_list shows it (without its value).
type KVEntry = vfs.KV

// KVKeys is kv_list's answer.
type KVKeys struct {
	Keys      []KVEntry `json:"keys"`
	Truncated bool      `json:"truncated,omitempty"`
}

func (k KVKeys) AuditSummary() any { return map[string]any{"keys": len(k.Keys)} }

// KVDeleted is kv_delete's answer.
type KVDeleted struct {
	Deleted bool `json:"deleted" jsonschema_description:"false: there was no such key"`
}

func checkKey(key string) error {
	switch {
	case key == "":
		return orchestrator.FieldErrorf("key", "key is required")
	case len(key) > MaxKeyLen:
		return orchestrator.FieldErrorf("key", "key is longer than %d bytes", MaxKeyLen)
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return orchestrator.FieldErrorf("key", "key must be UTF-8 text without NUL")
	}
	return nil
}

// KVGet returns key's entry with its value.
func (s *Service) KVGet(ctx context.Context, sessionID, key string) (KVValue, error) {
	if err := checkKey(key); err != nil {
		return KVValue{}, err
	}
	v, err := s.v.KVGet(ctx, sessionID, key)
	if err != nil {
		return KVValue{}, err
	}
	return KVValue{Key: key, Value: v}, nil
}

// KVSet stores value (JSON) under key.
func (s *Service) KVSet(ctx context.Context, sessionID, key string, value json.RawMessage) (KVValue, error) {
	if err := checkKey(key); err != nil {
		return KVValue{}, err
	}
	if len(value) == 0 {
		return KVValue{}, orchestrator.FieldErrorf("value", "value is required (any JSON)")
	}
	if len(value) > MaxValueLen {
		return KVValue{}, orchestrator.Errorf(orchestrator.ETooLarge, "value of %q is %d bytes; the limit is %d", key, len(value), MaxValueLen)
	}
	if _, err := s.v.KVGet(ctx, sessionID, key); orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		keys, err := s.v.KVList(ctx, sessionID)
		if err != nil {
			return KVValue{}, err
		}
		if len(keys) >= MaxKeys {
			return KVValue{}, orchestrator.Errorf(orchestrator.ETooLarge, "the session has %d keys, the most it may; delete some first", len(keys))
		}
	}
	if err := s.v.KVSet(ctx, sessionID, key, value); err != nil {
		return KVValue{}, err
	}
	return KVValue{Key: key, Value: value}, nil
}

// KVList returns the session's keys (without values) that start with
// prefix, in order, at most MaxListResults.
func (s *Service) KVList(ctx context.Context, sessionID, prefix string) (KVKeys, error) {
	all, err := s.v.KVList(ctx, sessionID)
	if err != nil {
		return KVKeys{}, err
	}
	out := KVKeys{Keys: []KVEntry{}}
	for _, e := range all {
		if !strings.HasPrefix(e.Key, prefix) {
			continue
		}
		if len(out.Keys) == MaxListResults {
			out.Truncated = true
			break
		}
		out.Keys = append(out.Keys, e)
	}
	return out, nil
}

// KVDelete removes key.
func (s *Service) KVDelete(ctx context.Context, sessionID, key string) (KVDeleted, error) {
	if err := checkKey(key); err != nil {
		return KVDeleted{}, err
	}
	if _, err := s.v.KVGet(ctx, sessionID, key); orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return KVDeleted{}, nil
	}
	return KVDeleted{Deleted: true}, s.v.KVDelete(ctx, sessionID, key)
}
