package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/protocol"
)

// Close reasons of the stream.
const (
	reasonShutdown = "server shutting down"
	reasonDeleted  = "session deleted"
)

// statusSessionDeleted closes the streams of a session that was deleted (an
// application close code: 4000 + the HTTP status a new stream would get).
const statusSessionDeleted websocket.StatusCode = 4404

// statusAfterBeyondLast closes a stream asked for records after a seq the
// session does not have (a client of another database): the client must
// reload the session and resume from a seq it has.
const statusAfterBeyondLast websocket.StatusCode = 4422

// errSessionDeleted ends the hub subscriptions of a deleted session.
var errSessionDeleted = errors.New("session deleted")

// streamQuery is the query of GET .../stream.
type streamQuery struct {
	After int64 `query:"after" jsonschema_description:"return records with seq greater than this"`
}

func (streamQuery) JSONSchemaExtend(s *jsonschema.Schema) { bound(s, "after", 0, math.MaxInt64, 0) }

// stream serves GET /api/v1/sessions/:id/stream?after=N: it subscribes to the
// hub first, replays the records after N from the store in pages, then
// forwards live records, skipping any seq already sent and fetching any gap
// from the store, so the client sees every record after N exactly once, in
// order (DESIGN invariant 2). A client too slow for its buffer is closed with
// 1013 and resumes with after=<last seq>. When the session is deleted, its
// streams close with 4404.
func (s *Server) stream(c echo.Context) error {
	r := c.Request()
	ctx := r.Context()
	p := principal(c)
	uid, sid := p.User.ID, c.Param("id")
	var q streamQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	after := q.After
	if _, err := s.sessions.GetSession(ctx, uid, sid); err != nil {
		return err
	}
	// A client can only know seqs the session has: a larger after (a
	// client of another database) would silently skip every record up to it.
	last, err := s.store.LastSeq(ctx, sid)
	if err != nil {
		return err
	}
	beyond := ""
	if after > last {
		beyond = fmt.Sprintf("after=%d is beyond the last record of this session (%d): reload and resume with after=%d or less", after, last, last)
		if !isUpgrade(r) {
			return orchestrator.FieldErrorf("after", "%s", beyond)
		}
	}
	if err := checkOrigin(r, s.cfg.AllowedOrigins); err != nil {
		return err
	}
	if !isUpgrade(r) {
		return badRequest("", "this route is a WebSocket: send an Upgrade: websocket request")
	}
	if !s.trackStream() {
		return orchestrator.Errorf(orchestrator.EUnavailable, "server shutting down")
	}
	defer s.streams.Done()

	sub := s.hub.Subscribe(sid) // before the replay: nothing falls between them
	defer sub.Close()
	// A delete between the check above and Subscribe ended no subscription
	// of ours: check again.
	if _, err := s.sessions.GetSession(ctx, uid, sid); err != nil {
		return err
	}

	conn, err := websocket.Accept(c.Response(), r, &websocket.AcceptOptions{OriginPatterns: s.cfg.AllowedOrigins})
	if err != nil {
		s.log.Debug("websocket accept", "err", err)
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	if beyond != "" {
		// A browser cannot read an HTTP status of a WebSocket handshake:
		// say it with a close code it can act on.
		_ = conn.Close(statusAfterBeyondLast, beyond)
		return nil
	}

	// The reader goroutine (pongs, client close) must outlive shutdown so
	// that we can still send the 1001 close frame: it ends with the conn.
	readCtx := conn.CloseRead(context.Background())
	ctx, cancel := context.WithCancel(readCtx)
	defer cancel()
	stopOnShutdown := context.AfterFunc(s.streamCtx, cancel)
	defer stopOnShutdown()

	pingDone := make(chan struct{})
	go func() {
		defer close(pingDone)
		s.keepalive(ctx, cancel, conn)
	}()
	defer func() { cancel(); <-pingDone }()

	st := &streamer{s: s, conn: conn, sid: sid, last: after, frames: s.frames.acquire(sid)}
	defer s.frames.release(sid, st.frames)
	if p.NodeID != "" {
		// A node key reads only its subtree's records (invariant 9).
		if st.scope, err = s.newRecordScope(ctx, p); err != nil {
			s.log.Warn("stream scope", "session", sid, "node", p.NodeID, "err", err)
			_ = conn.Close(websocket.StatusInternalError, "internal error")
			return nil
		}
	}
	err = st.run(ctx, sub)
	code, reason := websocket.StatusNormalClosure, ""
	switch {
	case errors.Is(err, hub.ErrTooSlow):
		code, reason = websocket.StatusTryAgainLater, fmt.Sprintf("too slow; reconnect with after=%d", st.last)
		s.log.Info("stream client too slow", "session", sid, "last_seq", st.last)
	case errors.Is(err, errSessionDeleted):
		code, reason = statusSessionDeleted, reasonDeleted
	case s.streamCtx.Err() != nil, errors.Is(err, hub.ErrClosed):
		code, reason = websocket.StatusGoingAway, reasonShutdown
	case readCtx.Err() != nil:
		return nil // the client went away or closed
	case err != nil && ctx.Err() != nil:
		return nil // keepalive failed: the conn is dead
	case errors.As(err, new(*writeError)):
		s.log.Debug("stream write failed", "session", sid, "last_seq", st.last, "err", err)
		return nil // the client is gone
	case err != nil:
		s.log.Warn("stream failed", "session", sid, "last_seq", st.last, "err", err)
		code, reason = websocket.StatusInternalError, "internal error; reconnect with after="+fmt.Sprint(st.last)
	}
	_ = conn.Close(code, reason)
	return nil
}

// trackStream counts a stream handler unless the server is shutting down.
func (s *Server) trackStream() bool {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.streamCtx.Err() != nil {
		return false
	}
	s.streams.Add(1)
	return true
}

// keepalive pings the client every PingInterval; a missing pong within
// PingTimeout cancels the stream.
func (s *Server) keepalive(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn) {
	t := time.NewTicker(s.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, pcancel := context.WithTimeout(ctx, s.cfg.PingTimeout)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Debug("stream ping failed", "err", err)
				}
				cancel()
				return
			}
		}
	}
}

// streamer sends one session's records over one WebSocket. last is the seq of
// the last record sent or, for a node key, passed over as out of its scope.
type streamer struct {
	s     *Server
	conn  *websocket.Conn
	sid   string
	last  int64
	scope *recordScope // nil: every record (the user)
	// frames encodes each record once for all the session's streams.
	frames *sessionFrames
}

// run replays then forwards live records until ctx ends or the subscription
// is dropped (its error is returned).
func (st *streamer) run(ctx context.Context, sub *hub.Subscription[protocol.Record]) error {
	if err := st.catchUp(ctx, math.MaxInt64); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case rec, ok := <-sub.C():
			if !ok {
				if err := sub.Err(); err != nil {
					return err
				}
				return hub.ErrClosed
			}
			if rec.Seq <= st.last {
				continue // already sent by the replay
			}
			if rec.Seq > st.last+1 {
				// A gap (e.g. published out of order): read it from the store.
				if err := st.catchUp(ctx, rec.Seq-1); err != nil {
					return err
				}
			}
			if err := st.deliver(ctx, rec); err != nil {
				return err
			}
		}
	}
}

// catchUp sends the stored records after st.last up to seq upto, in pages.
func (st *streamer) catchUp(ctx context.Context, upto int64) error {
	page := st.s.cfg.ReplayPage
	for st.last < upto {
		recs, err := st.s.store.Records(ctx, st.sid, st.last, page, "")
		if err != nil {
			return fmt.Errorf("replay session %s after %d: %w", st.sid, st.last, err)
		}
		for _, rec := range recs {
			if rec.Seq > upto {
				return nil
			}
			if err := st.deliver(ctx, rec); err != nil {
				return err
			}
		}
		if len(recs) < page {
			return nil
		}
	}
	return nil
}

// deliver sends rec unless it was sent or is out of the stream's scope.
func (st *streamer) deliver(ctx context.Context, rec protocol.Record) error {
	if rec.Seq <= st.last {
		return nil
	}
	if st.scope != nil {
		ok, err := st.scope.allows(ctx, rec)
		if err != nil {
			return fmt.Errorf("scope of record %d: %w", rec.Seq, err)
		}
		if !ok {
			st.last = rec.Seq
			return nil
		}
	}
	return st.send(ctx, rec)
}

func (st *streamer) send(ctx context.Context, rec protocol.Record) error {
	b, err := st.frames.encode(rec)
	if err != nil {
		return fmt.Errorf("encode record %d: %w", rec.Seq, err)
	}
	wctx, cancel := context.WithTimeout(ctx, st.s.cfg.WriteTimeout)
	defer cancel()
	if err := st.conn.Write(wctx, websocket.MessageText, b); err != nil {
		return &writeError{seq: rec.Seq, err: err}
	}
	st.last = rec.Seq
	return nil
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// checkOrigin allows a request without Origin (not a browser), one from the
// request's own host, or one matching a configured pattern (the same rule as
// websocket.Accept, answered as a JSON 403).
func checkOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	return checkOriginValue(origin, r.Host, patterns)
}

// writeError is a failed write to the client: the client is gone or stuck.
type writeError struct {
	seq int64
	err error
}

func (e *writeError) Error() string { return fmt.Sprintf("write record %d: %v", e.seq, e.err) }
func (e *writeError) Unwrap() error { return e.err }

// encodeRecord is rec's JSON, one WebSocket message. It does not escape
// '<', '>' and '&' as json.Marshal does: the data reach the client as the
// store keeps them.
func encodeRecord(rec protocol.Record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
