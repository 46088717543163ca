package api

import (
	"sync"

	"github.com/filepath-dev/filepath/protocol"
)

// frameSlots is how many recent records of a session keep their encoding:
// more than a live burst that all of a session's streams send at about the
// same time, few enough that a followed session costs tens of KiB.
const frameSlots = 256

// frames keeps the wire encoding of the records that the streams of a
// session send, so that N clients following a session cost one JSON
// encoding per record, not N (issue 23). Only sessions with an open stream
// have an entry; it goes with the last stream.
type frames struct {
	mu       sync.Mutex // guards sessions; leaf
	sessions map[string]*sessionFrames
}

// sessionFrames is one session's recent encodings, slot seq % frameSlots.
type sessionFrames struct {
	refs int // guarded by frames.mu

	mu   sync.Mutex // guards seq, wire; leaf (held while one record is encoded)
	seq  [frameSlots]int64
	wire [frameSlots][]byte
}

// acquire returns sessionID's encodings for one more stream.
func (f *frames) acquire(sessionID string) *sessionFrames {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions == nil {
		f.sessions = make(map[string]*sessionFrames)
	}
	sf := f.sessions[sessionID]
	if sf == nil {
		sf = &sessionFrames{}
		f.sessions[sessionID] = sf
	}
	sf.refs++
	return sf
}

// release drops a stream's hold on sessionID's encodings.
func (f *frames) release(sessionID string, sf *sessionFrames) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf.refs--
	if sf.refs == 0 && f.sessions[sessionID] == sf {
		delete(f.sessions, sessionID)
	}
}

// encode returns rec's wire encoding, made once for the session's streams.
// The bytes are shared: callers must not change them.
func (sf *sessionFrames) encode(rec protocol.Record) ([]byte, error) {
	i := rec.Seq % frameSlots
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.seq[i] == rec.Seq && sf.wire[i] != nil {
		return sf.wire[i], nil
	}
	b, err := encodeRecord(rec)
	if err != nil {
		return nil, err
	}
	sf.seq[i], sf.wire[i] = rec.Seq, b
	return b, nil
}
