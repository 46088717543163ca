package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// apiError is an answer of the gateway itself, written in the shape of the
// provider the agent is talking to, so its SDK shows the message.
type apiError struct {
	status int
	kind   string // OpenAI's error.type / Anthropic's error.type, by status
	code   string // OpenAI's error.code
	msg    string
	// retry false tells the providers' SDKs not to retry (x-should-retry),
	// for answers that retrying cannot change.
	retry bool
}

// errorTypes maps a gateway status to each shape's error type.
var errorTypes = map[int][2]string{ // status -> {openai, anthropic}
	http.StatusBadRequest:            {"invalid_request_error", "invalid_request_error"},
	http.StatusUnauthorized:          {"authentication_error", "authentication_error"},
	http.StatusNotFound:              {"not_found_error", "not_found_error"},
	http.StatusMethodNotAllowed:      {"invalid_request_error", "invalid_request_error"},
	http.StatusRequestEntityTooLarge: {"invalid_request_error", "request_too_large"},
	http.StatusTooManyRequests:       {"insufficient_quota", "rate_limit_error"},
	http.StatusInternalServerError:   {"server_error", "api_error"},
	http.StatusBadGateway:            {"server_error", "api_error"},
	http.StatusServiceUnavailable:    {"server_error", "api_error"},
	http.StatusGatewayTimeout:        {"server_error", "api_error"},
}

// write answers e in the OpenAI shape {"error":{"message","type","code"}}, or
// with anthropic in Anthropic's {"type":"error","error":{"type","message"}}.
func (e apiError) write(w http.ResponseWriter, anthropic bool) {
	types := errorTypes[e.status]
	if types[0] == "" {
		types = [2]string{"server_error", "api_error"}
	}
	var body any
	if anthropic {
		body = map[string]any{"type": "error", "error": map[string]string{"type": types[1], "message": e.msg}}
	} else {
		code := e.code
		if code == "" {
			code = strconv.Itoa(e.status)
		}
		body = map[string]any{"error": map[string]string{"message": e.msg, "type": types[0], "code": code}}
	}
	b, _ := json.Marshal(body) // strings only
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if !e.retry {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

// WriteError answers an agent's request with status and msg in the error
// shape of the provider its path names (Anthropic's under /anthropic/,
// OpenAI's elsewhere), for the agent-facing listener's own refusals (a bad
// token) on the gateway's routes. Statuses 4xx other than 408 and 409 tell
// the SDKs not to retry.
func WriteError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	retry := status >= 500 || status == http.StatusRequestTimeout || status == http.StatusConflict
	apiError{status: status, msg: msg, retry: retry}.write(w, strings.HasPrefix(r.URL.Path, "/anthropic/"))
}
