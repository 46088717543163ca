package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// StatusClientClosed is the status metered for a request whose agent went
// away before the answer ended (nginx's 499): what the upstream reported
// until then is metered, nothing more.
const StatusClientClosed = 499

// forwardHeaders are the request headers sent on to the upstream: what
// selects the wire format and its features. Everything else stays: the
// agent's credentials (Authorization, x-api-key: the node token must never
// leave the machine), cookies, and headers that could change which account
// is billed or how (OpenAI-Organization, OpenAI-Project, provider routing
// keys). Accept-Encoding too: the upstream answers in identity encoding so
// its bytes pass through as they are and the usage can be read from them.
var forwardHeaders = []string{
	"Content-Type", "Accept", "User-Agent",
	"Anthropic-Version", "Anthropic-Beta", // Claude Code needs both
	"Openai-Beta", "Idempotency-Key",
	"Http-Referer", "X-Title", // OpenRouter's app attribution
}

// dropResponseHeaders are upstream response headers not passed back:
// hop-by-hop ones, and cookies set for the gateway's connection.
var dropResponseHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Set-Cookie": true,
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP serves the routes of GATEWAY.md. The node comes from the
// request context (orchestrator.WithCaller, set by the agent-facing
// listener after checking its token).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	anthropic := strings.HasPrefix(r.URL.Path, "/anthropic/")
	rt, ok := routes[r.URL.Path]
	if !ok {
		apiError{status: http.StatusNotFound, msg: fmt.Sprintf("the LLM gateway has no endpoint %s", r.URL.Path)}.write(w, anthropic)
		return
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		apiError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, rt.method)}.write(w, anthropic)
		return
	}
	caller, ok := orchestrator.CallerFrom(r.Context())
	if !ok {
		apiError{status: http.StatusUnauthorized, msg: "no valid node token: send $FILEPATH_API_KEY as Authorization: Bearer or x-api-key"}.write(w, anthropic)
		return
	}
	g.begin()
	defer g.end()
	start := time.Now()
	u := sessions.Usage{UserID: caller.UserID, SessionID: caller.SessionID, NodeID: caller.NodeID, Provider: rt.provider,
		Endpoint: strings.TrimPrefix(rt.upstream, "/")}
	// refuse answers e without asking the upstream; the request is metered
	// all the same (it spent nothing).
	refuse := func(e apiError, note string) {
		if e.status != 0 {
			e.write(w, anthropic)
			u.Status = e.status
		}
		u.Latency, u.Note = time.Since(start), note
		g.meter(u)
	}
	p := g.providers[rt.provider]
	if p.key == "" {
		e := apiError{status: http.StatusServiceUnavailable, msg: g.Configured(rt.provider).Error()}
		refuse(e, "refused: "+e.msg)
		return
	}
	var body []byte
	if rt.method == http.MethodPost {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			e := apiError{status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body is larger than the gateway's limit of %d bytes (FILEPATH_GATEWAY_MAX_BODY)", g.cfg.MaxBody)}
			refuse(e, "refused: "+e.msg)
			return
		case err != nil:
			u.Status = StatusClientClosed
			refuse(apiError{}, "the agent went away while sending the request: "+err.Error())
			return
		}
	}
	req := inspect(body)
	u.Model = req.Model
	if e, refused := g.checkBudget(r.Context(), caller); refused {
		refuse(e, "refused: "+e.msg)
		return
	}
	if rt.wire == wireChat && req.Stream && !req.wantsUsage() {
		if b, err := withIncludeUsage(body); err == nil {
			body = b
		}
	}
	g.forward(w, r, rt, p, body, anthropic, &u)
	u.Latency = time.Since(start)
	g.meter(u)
}

// forward sends the request upstream and passes the answer back, reading
// its usage on the side into u.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, rt route, p *provider, body []byte, anthropic bool, u *sessions.Usage) {
	start := time.Now()
	// An answer takes as long as the model writes: no server write deadline
	// (Config.Timeout bounds the upstream's silences instead).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// One timer bounds the wait for the headers, then each silence.
	timer := time.AfterFunc(g.cfg.Timeout, func() { cancel(errTimeout) })
	defer timer.Stop()

	target := *p.base
	target.Path += rt.upstream
	target.RawQuery = r.URL.RawQuery // e.g. Claude Code's ?beta=true
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, rt.method, target.String(), rd)
	if err != nil {
		apiError{status: http.StatusInternalServerError, msg: "build upstream request: " + err.Error()}.write(w, anthropic)
		u.Status = http.StatusInternalServerError
		return
	}
	for _, h := range forwardHeaders {
		if vs := r.Header.Values(h); len(vs) > 0 {
			out.Header[h] = vs
		}
	}
	if out.Header.Get("User-Agent") == "" {
		out.Header.Set("User-Agent", "filepath-gateway")
	}
	if p.name == Anthropic {
		out.Header.Set("X-Api-Key", p.key)
	} else {
		out.Header.Set("Authorization", "Bearer "+p.key)
	}

	resp, err := g.client.Do(out)
	if err != nil {
		if r.Context().Err() != nil {
			u.Status, u.Note = StatusClientClosed, "the agent went away before the upstream answered"
			return
		}
		e := g.upstreamError(p, ctx, err)
		g.log.Warn("LLM upstream failed", "provider", p.name, "node", u.NodeID, "status", e.status, "err", err)
		e.write(w, anthropic)
		u.Status, u.Note = e.status, e.msg
		return
	}
	defer resp.Body.Close()
	u.Status = resp.StatusCode
	h := w.Header()
	for k, vs := range resp.Header {
		if !dropResponseHeaders[k] {
			h[k] = vs
		}
	}
	for _, k := range resp.Header.Values("Connection") {
		for _, name := range strings.Split(k, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	u.Streamed = mt == "text/event-stream"
	w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()

	usage := newUsageReader(rt.wire, u.Streamed)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var readErr, writeErr error
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			timer.Reset(g.cfg.Timeout)
			if u.TTFB == nil {
				d := time.Since(start)
				u.TTFB = &d
			}
			// To the agent first, then to the usage reader: metering never
			// delays a byte.
			if _, writeErr = w.Write(buf[:n]); writeErr != nil {
				break
			}
			if writeErr = rc.Flush(); writeErr != nil && !errors.Is(writeErr, http.ErrNotSupported) {
				break
			}
			writeErr = nil
			usage.Write(buf[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
	}
	t := usage.Close()
	u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD = t.input, t.output, t.cacheRead, t.cacheWrite, t.cost
	if u.Model == "" {
		u.Model = t.model
	}
	var notes []string
	switch {
	case writeErr != nil || readErr != nil && r.Context().Err() != nil:
		u.Status = StatusClientClosed
		notes = append(notes, "the agent went away before the answer ended; metered what the upstream reported until then")
	case errors.Is(context.Cause(ctx), errTimeout):
		notes = append(notes, fmt.Sprintf("the upstream sent nothing for %s; the answer was cut", g.cfg.Timeout))
	case readErr != nil:
		notes = append(notes, "the upstream cut the answer: "+readErr.Error())
	}
	if rt.wire != wireNone && resp.StatusCode < 300 && !t.seen {
		notes = append(notes, "the upstream reported no usage")
	}
	if t.malformed > 0 {
		notes = append(notes, fmt.Sprintf("%d usage fields or events could not be read", t.malformed))
	}
	if len(notes) > 0 {
		u.Note = strings.Join(notes, "; ")
		g.log.Warn("LLM request metered with a note", "provider", p.name, "endpoint", u.Endpoint, "node", u.NodeID,
			"status", u.Status, "note", u.Note)
	}
}
