package agenttools

import (
	"context"
	"errors"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/protocol"
)

// errDeadline: follow's deadline passed before check said done.
var errDeadline = errors.New("deadline passed")

// follow calls check, then again after every record of the session for
// which relevant is true, until check reports done (nil), check fails, the
// deadline fires (errDeadline) or ctx ends. It subscribes before it checks,
// so that nothing appended in between is missed; a subscription dropped as
// too slow is made again, followed by a check. No polling: the session log
// is the only clock besides the deadline.
func (s *Server) follow(ctx context.Context, sessionID string, deadline <-chan time.Time, check func() (bool, error), relevant func(protocol.Record) bool) error {
	for {
		sub := s.hub.Subscribe(sessionID)
		done, err := check()
		if err != nil || done {
			sub.Close()
			return err
		}
		if err := s.await(ctx, sub, deadline, check, relevant); !errors.Is(err, hub.ErrTooSlow) {
			return err
		}
	}
}

// await reads sub until check is done; hub.ErrTooSlow asks follow to
// subscribe again.
func (s *Server) await(ctx context.Context, sub *hub.Subscription[protocol.Record], deadline <-chan time.Time, check func() (bool, error), relevant func(protocol.Record) bool) error {
	defer sub.Close()
	for {
		select {
		case r, ok := <-sub.C():
			if !ok {
				if err := sub.Err(); errors.Is(err, hub.ErrTooSlow) {
					return err
				}
				// The hub closed (shutdown) or the session was deleted.
				if _, err := check(); err != nil {
					return err
				}
				return orchestrator.Errorf(orchestrator.EUnavailable, "the orchestrator is shutting down; ask again")
			}
			if !relevant(r) {
				continue
			}
			if done, err := check(); err != nil || done {
				return err
			}
		case <-deadline:
			return errDeadline
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
