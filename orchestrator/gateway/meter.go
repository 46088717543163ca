package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// maxBatch bounds the requests written to the store in one go; meterLinger
// is how long the writer waits for more after the first.
const (
	maxBatch    = 512
	meterLinger = 5 * time.Millisecond
)

// maxNoticed bounds the over-budget notices remembered; past it they are
// forgotten (a node may then get one more notice). maxSpends bounds the
// sessions whose spend is cached.
const (
	maxNoticed = 10000
	maxSpends  = 10000
)

type meterItem struct {
	u    sessions.Usage
	sync chan struct{} // a Flush marker instead of a request
}

// spendEntry is a session's budget and spend as the gateway knows it: read
// from the store at most every SpendTTL, plus what the gateway metered since.
type spendEntry struct {
	sp sessions.Spend
	at time.Time
}

// spend returns the caller's session budget and spend. The budget check runs
// before every request; reading the store each time cost a fifth of a
// millisecond of the time to first byte. A budget changed through the API
// counts within SpendTTL; a request the gateway metered counts at once.
func (g *Gateway) spend(ctx context.Context, sessionID string) (sessions.Spend, error) {
	now := g.cfg.Now()
	g.spendMu.Lock()
	if e, ok := g.spends[sessionID]; ok && now.Sub(e.at) < g.cfg.SpendTTL {
		sp := e.sp
		g.spendMu.Unlock()
		return sp, nil
	}
	g.spendMu.Unlock()
	sp, err := g.cfg.Store.SessionSpend(ctx, sessionID)
	if err != nil {
		return sp, err
	}
	g.spendMu.Lock()
	if len(g.spends) >= maxSpends {
		clear(g.spends)
	}
	// Requests metered but still queued for the store are not in sp yet:
	// they count from the next read on (at most a few milliseconds).
	g.spends[sessionID] = &spendEntry{sp: sp, at: now}
	g.spendMu.Unlock()
	return sp, nil
}

// spent adds a metered request to its session's cached spend.
func (g *Gateway) spent(u sessions.Usage) {
	g.spendMu.Lock()
	if e, ok := g.spends[u.SessionID]; ok {
		e.sp.TokensUsed += u.Tokens()
		if u.CostUSD != nil {
			e.sp.CostUSD += *u.CostUSD
		}
	}
	g.spendMu.Unlock()
}

// meter queues a finished request for the store. After Close it is written
// at once.
func (g *Gateway) meter(u sessions.Usage) {
	g.spent(u)
	g.mu.RLock()
	if !g.closed {
		g.queue <- meterItem{u: u} // waits when the writer is behind: never dropped
		g.mu.RUnlock()
		return
	}
	g.mu.RUnlock()
	g.record([]sessions.Usage{u})
}

// begin and end bracket a request that will be metered, for Flush.
func (g *Gateway) begin() {
	g.flightMu.Lock()
	g.inFlight++
	g.flightMu.Unlock()
}

func (g *Gateway) end() {
	g.flightMu.Lock()
	g.inFlight--
	if g.inFlight == 0 {
		g.idle.Broadcast()
	}
	g.flightMu.Unlock()
}

// Flush waits until no request is in flight, then until every request
// metered so far is in the store (tests and benchmarks: an agent may have
// read the whole answer before its request is metered).
func (g *Gateway) Flush() {
	g.flightMu.Lock()
	for g.inFlight > 0 {
		g.idle.Wait()
	}
	g.flightMu.Unlock()
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return
	}
	done := make(chan struct{})
	g.queue <- meterItem{sync: done}
	g.mu.RUnlock()
	<-done
}

// writeUsage writes queued requests to the store, many per transaction when
// they arrive together, until Close; then it writes what is left.
func (g *Gateway) writeUsage() {
	defer close(g.done)
	batch := make([]sessions.Usage, 0, maxBatch)
	var syncs []chan struct{}
	add := func(it meterItem) {
		if it.sync != nil {
			syncs = append(syncs, it.sync)
		} else {
			batch = append(batch, it.u)
		}
	}
	flush := func() {
		if len(batch) > 0 {
			g.record(batch)
		}
		for _, c := range syncs {
			close(c)
		}
		batch, syncs = batch[:0], syncs[:0]
	}
	for {
		select {
		case it := <-g.queue:
			add(it)
			// Linger a little for more: one transaction (and one node record)
			// for many requests of a busy session, instead of one each.
			linger := time.NewTimer(meterLinger)
		more:
			for len(batch) < maxBatch && len(syncs) == 0 {
				select {
				case it := <-g.queue:
					add(it)
				case <-linger.C:
					break more
				case <-g.quit:
					break more
				}
			}
			linger.Stop()
			flush()
		case <-g.quit:
			// Close holds no sender any more: what is queued is all.
			for {
				select {
				case it := <-g.queue:
					add(it)
					if len(batch) >= maxBatch {
						flush()
					}
					continue
				default:
				}
				break
			}
			flush()
			return
		}
	}
}

// record writes requests to the store; a failure is logged with every row
// so that the log still holds what was spent.
func (g *Gateway) record(us []sessions.Usage) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.cfg.Store.RecordUsage(ctx, us...); err != nil {
		for _, u := range us {
			g.log.Error("LLM usage not stored", "err", err, "user", u.UserID, "session", u.SessionID, "node", u.NodeID,
				"provider", u.Provider, "endpoint", u.Endpoint, "model", u.Model, "input", u.InputTokens, "output", u.OutputTokens,
				"cache_read", u.CacheReadTokens, "cache_write", u.CacheWriteTokens, "cost_usd", u.CostUSD, "status", u.Status)
		}
	}
}

// checkBudget refuses a request when the caller's session has used up its
// budget: a 429 naming the budget and how to raise it, and once per node and
// budget an error record in the node's chat saying the same.
func (g *Gateway) checkBudget(ctx context.Context, c orchestrator.Caller) (apiError, bool) {
	sp, err := g.spend(ctx, c.SessionID)
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
			return apiError{status: http.StatusUnauthorized, msg: "this node's session no longer exists"}, true
		}
		g.log.Error("read session budget", "session", c.SessionID, "err", err)
		return apiError{status: http.StatusInternalServerError, retry: true, msg: "the gateway could not read the session's budget"}, true
	}
	what, over := sp.Over()
	if !over {
		return apiError{}, false
	}
	msg := budgetMessage(c.SessionID, sp, what)
	g.notice(ctx, c, sp, msg)
	return apiError{status: http.StatusTooManyRequests, code: "budget_exceeded", msg: msg}, true
}

func budgetMessage(sessionID string, sp sessions.Spend, what string) string {
	if what == "usd" {
		return fmt.Sprintf("this session's LLM budget is used up: $%.4f of $%.4f spent (budget_usd). "+
			"The session's owner can raise or clear it: PATCH /api/v1/sessions/%s with {\"budget_usd\": <dollars>} (null: unlimited)",
			sp.CostUSD, *sp.USD, sessionID)
	}
	return fmt.Sprintf("this session's LLM budget is used up: %d of %d tokens used (budget_tokens). "+
		"The session's owner can raise or clear it: PATCH /api/v1/sessions/%s with {\"budget_tokens\": <tokens>} (null: unlimited)",
		sp.TokensUsed, *sp.Tokens, sessionID)
}

// notice appends the over-budget error record to the node's chat, unless
// this node already got one for this budget.
func (g *Gateway) notice(ctx context.Context, c orchestrator.Caller, sp sessions.Spend, msg string) {
	state := budgetState(sp.Budget)
	g.noticeMu.Lock()
	if g.noticed[c.NodeID] == state {
		g.noticeMu.Unlock()
		return
	}
	if len(g.noticed) >= maxNoticed {
		clear(g.noticed)
	}
	g.noticed[c.NodeID] = state
	g.noticeMu.Unlock()

	data, _ := json.Marshal(map[string]string{"message": msg, "source": "gateway"})
	if _, err := g.cfg.Log.Append(context.WithoutCancel(ctx), c.SessionID,
		protocol.Record{NodeID: c.NodeID, Kind: protocol.KindError, Data: data}); err != nil {
		g.log.Warn("record the over-budget notice", "node", c.NodeID, "err", err)
		g.noticeMu.Lock()
		if g.noticed[c.NodeID] == state {
			delete(g.noticed, c.NodeID)
		}
		g.noticeMu.Unlock()
	}
}

// budgetState names a budget: a node is told again when its session's
// budget changes and is used up again.
func budgetState(b sessions.Budget) string {
	s := "-"
	if b.Tokens != nil {
		s = strconv.FormatInt(*b.Tokens, 10)
	}
	s += "/"
	if b.USD != nil {
		s += strconv.FormatFloat(*b.USD, 'g', -1, 64)
	} else {
		s += "-"
	}
	return s
}
