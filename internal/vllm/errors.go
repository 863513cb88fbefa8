package vllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNotReady means the server did not answer: connection refused while it
// loads, or /health not 200 yet.
var ErrNotReady = errors.New("server not ready")

// ErrTruncated means a stream ended without `data: [DONE]`.
var ErrTruncated = errors.New("stream ended without [DONE]")

// APIError is an error answer from the server: an HTTP status ≥ 400, or an
// error event inside a 200 stream (Status is then 200 and InStream true).
type APIError struct {
	Status   int
	Type     string
	Message  string
	InStream bool
	Body     string // the raw body when it was not one of vLLM's error shapes
	// Param is the request parameter a validation error names
	// ("query.level"), "" when none.
	Param string
}

func (e *APIError) Error() string {
	where := fmt.Sprintf("HTTP %d", e.Status)
	if e.InStream {
		where = "error event in stream"
	}
	if e.Param != "" {
		where += " (" + e.Param + ")"
	}
	msg := e.Message
	if e.Status == 400 && (e.Param == "query.level" || e.Param == "query.mode") {
		// vLLM #52864 (v0.32 on): /sleep's level and mode are validated
		// before the engine is called (docs/vllm-api.md §2).
		msg += fmt.Sprintf(" [the server refused the sleep's %s before calling the engine: vLLM ≥ 0.32 takes level 0, 1 or 2 and mode abort, wait or keep; nothing was slept]", strings.TrimPrefix(e.Param, "query."))
	}
	switch {
	case e.Message != "" && e.Type != "":
		return fmt.Sprintf("%s %s: %s", where, e.Type, msg)
	case e.Message != "":
		return fmt.Sprintf("%s: %s", where, msg)
	case e.Body != "":
		return fmt.Sprintf("%s: %s", where, e.Body)
	}
	return where
}

// ParseError reads any of vLLM's error bodies:
//
//	{"error": {"message": …, "type": …, "code": N}}       (v0.10.1 and later)
//	{"object": "error", "message": …, "type": …, "code": N} (before v0.10.1)
//	{"error": "Unauthorized"}                              (bad API key)
//	{"detail": …}                                          (FastAPI HTTPException)
//
// Anything else is kept verbatim in Body (cut to 512 bytes).
func ParseError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var probe struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &probe) == nil {
		var nested struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
		}
		var s string
		switch {
		case len(probe.Error) > 0 && json.Unmarshal(probe.Error, &nested) == nil && nested.Message != "":
			e.Message, e.Type = nested.Message, nested.Type
			if p, ok := nested.Param.(string); ok {
				e.Param = p
			}
			return e
		case len(probe.Error) > 0 && json.Unmarshal(probe.Error, &s) == nil:
			e.Message = s
			return e
		case probe.Object == "error" || probe.Message != "":
			e.Message, e.Type = probe.Message, probe.Type
			return e
		case len(probe.Detail) > 0:
			if json.Unmarshal(probe.Detail, &s) == nil {
				e.Message = s
			} else {
				e.Message = string(probe.Detail)
			}
			return e
		}
	}
	b := strings.TrimSpace(string(body))
	if len(b) > 512 {
		b = b[:512] + "…"
	}
	e.Body = b
	return e
}
