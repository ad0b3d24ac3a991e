package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Sentinel errors found in Result.Err with errors.Is. They are immutable and
// safe to share.
var (
	// ErrFirstTokenTimeout means no content arrived within
	// Config.FirstTokenTimeout of the send.
	ErrFirstTokenTimeout = errors.New("first token timeout")
	// ErrRequestTimeout means the request outlived Config.RequestTimeout.
	ErrRequestTimeout = errors.New("request timeout")
	// ErrTruncated means the stream ended before [DONE] and before any
	// finish reason.
	ErrTruncated = errors.New("stream ended before [DONE] or a finish reason")
	// ErrNotStreamed means a 200 response was not an event stream (the
	// server ignored stream: true).
	ErrNotStreamed = errors.New("response is not an event stream")
	// ErrNilRequest means Stream was called with a nil *Request.
	ErrNilRequest = errors.New("nil request")
)

// errDrained cancels the read of what follows [DONE] when it does not end
// promptly. It never reaches a Result.
var errDrained = errors.New("drain after done")

// maxErrorMessage bounds the text taken from a server into an error.
const maxErrorMessage = 512

// HTTPError is the error of a non-200 response. Message is taken from a
// bounded prefix of the body: the "message" of an OpenAI-style error object
// when there is one, otherwise the body text. An HTTPError is immutable once
// built and safe to share.
type HTTPError struct {
	StatusCode int
	Message    string
}

// Error implements error.
func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("http status %d", e.StatusCode)
	}
	return fmt.Sprintf("http status %d: %s", e.StatusCode, e.Message)
}

// StreamError is an error the server reported inside an open stream, as an
// "error" object in a data event or as an event of type "error". A
// StreamError is immutable once built and safe to share.
type StreamError struct {
	Type    string
	Message string
}

// Error implements error.
func (e *StreamError) Error() string {
	if e.Type == "" {
		return "server error in stream: " + e.Message
	}
	return fmt.Sprintf("server error in stream (%s): %s", e.Type, e.Message)
}

// errorMessage extracts a readable message from an error body: OpenAI and
// current vLLM {"error":{"message":...}}, older vLLM {"object":"error",
// "message":...}, FastAPI {"detail":...}, or the text itself.
func errorMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &v) == nil {
		var d openai.ErrorDetail
		switch {
		case len(v.Error) > 0 && json.Unmarshal(v.Error, &d) == nil && d.Message != "":
			return clean(d.Message)
		case len(v.Error) > 0 && v.Error[0] == '"':
			var s string
			if json.Unmarshal(v.Error, &s) == nil {
				return clean(s)
			}
		case v.Message != "":
			return clean(v.Message)
		case len(v.Detail) > 0:
			var s string
			if json.Unmarshal(v.Detail, &s) == nil {
				return clean(s)
			}
			return clean(string(v.Detail))
		}
	}
	return clean(string(body))
}

// clean makes server text safe for one log line: valid UTF-8, no control
// characters, at most maxErrorMessage bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
