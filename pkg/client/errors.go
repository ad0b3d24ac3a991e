package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
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

// errTLSHandshake marks a failed TLS handshake on the HTTP/1.1 path, whose
// cause (a certificate error, an alert, garbage instead of a handshake)
// need not have a type of crypto/tls's own.
var errTLSHandshake = errors.New("tls handshake")

// errMalformedResponse marks a response head that did not parse, as opposed
// to a connection that failed while it was read.
var errMalformedResponse = errors.New("malformed response")

// errDrained cancels the read of what follows [DONE] when it does not end
// promptly. It never reaches a Result.
var errDrained = errors.New("drain after done")

// maxErrorMessage bounds the text taken from a server into an error.
const maxErrorMessage = 512

// maxRetryAfter bounds the Retry-After value kept: a number of seconds or
// an HTTP date is well under it.
const maxRetryAfter = 64

// HTTPError is the error of a non-200 response. Message is taken from a
// bounded prefix of the body: the "message" of an OpenAI-style error object
// when there is one, otherwise the body text. An HTTPError is immutable once
// built and safe to share.
// RetryAfter is the response's Retry-After header, cleaned, when it had
// one.
type HTTPError struct {
	StatusCode int
	Message    string
	RetryAfter string
}

// Error implements error.
func (e *HTTPError) Error() string {
	s := fmt.Sprintf("http status %d", e.StatusCode)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RetryAfter != "" {
		s += " (retry after " + e.RetryAfter + ")"
	}
	return s
}

// statusClass is the class of a non-200 response with the given status.
func statusClass(status int) Class {
	switch {
	case status == http.StatusBadRequest:
		return ClassBadRequest
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ClassAuth
	case status == http.StatusNotFound:
		return ClassNotFound
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return ClassTimeout
	case status == http.StatusTooManyRequests:
		return ClassRateLimited
	case status >= 500:
		return ClassHTTP5xx
	default:
		return ClassHTTP4xx
	}
}

// isTLSError reports whether err comes from a TLS handshake or a
// certificate check: the HTTP/1.1 path's errTLSHandshake, crypto/tls's and
// crypto/x509's error types, or an alert, which crypto/tls reports as a
// *net.OpError whose Op is "remote error" or "local error".
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		ech      *tls.ECHRejectionError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	return errors.Is(err, errTLSHandshake) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) || errors.As(err, &ech) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		(errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error"))
}

// h2StreamError mirrors net/http's HTTP/2 stream error (an RST_STREAM, sent
// or received), which is unexported but fills any struct of this shape
// through its As method, so errors.As finds its code without matching text.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string {
	return fmt.Sprintf("http2 stream %d error code %d", e.StreamID, e.Code)
}

// HTTP/2 error codes (RFC 9113 section 7) that mean a peer broke the
// protocol, as opposed to giving up on a stream (CANCEL, INTERNAL_ERROR,
// REFUSED_STREAM).
const (
	h2ProtocolError    = 0x1
	h2FlowControlError = 0x3
	h2FrameSizeError   = 0x6
	h2CompressionError = 0x9
)

// isProtocolError reports whether err means the server's response did not
// follow HTTP: a response head that did not parse, or an HTTP/2 stream
// reset for a protocol, flow-control, frame-size or compression error.
func isProtocolError(err error) bool {
	if errors.Is(err, errMalformedResponse) {
		return true
	}
	var se h2StreamError
	if errors.As(err, &se) {
		switch se.Code {
		case h2ProtocolError, h2FlowControlError, h2FrameSizeError, h2CompressionError:
			return true
		}
	}
	return false
}

// StreamError is an error the server reported inside an open stream, as an
// "error" object in a data event or as an event of type "error". A
// StreamError is immutable once built and safe to share.
type StreamError struct {
	Type string
	// Code is the object's "code" as sent: a status number ("400") or a
	// name ("rate_limit_exceeded"); empty when it had none.
	Code    string
	Message string
}

// Error implements error.
func (e *StreamError) Error() string {
	var about []string
	if e.Type != "" {
		about = append(about, e.Type)
	}
	if e.Code != "" {
		about = append(about, "code "+e.Code)
	}
	if len(about) == 0 {
		return "server error in stream: " + e.Message
	}
	return fmt.Sprintf("server error in stream (%s): %s", strings.Join(about, ", "), e.Message)
}

// Class is the class of the error: that of the HTTP status its code (or,
// failing a numeric one, its code's or type's name) stands for, classed as
// statusClass classes a response with that status; ClassProtocol when it
// names none.
func (e *StreamError) Class() Class {
	if status := errorStatus(e.Code, e.Type); status != 0 {
		return statusClass(status)
	}
	return ClassProtocol
}

// errorNameStatus maps the names servers give in-stream errors, as a code
// (OpenAI: "rate_limit_exceeded") or a type (vLLM: the Python exception's,
// "BadRequestError"), lower-cased, to the HTTP status they stand for.
var errorNameStatus = map[string]int{
	"badrequesterror":         http.StatusBadRequest,
	"invalid_request_error":   http.StatusBadRequest,
	"context_length_exceeded": http.StatusBadRequest,
	"authenticationerror":     http.StatusUnauthorized,
	"authentication_error":    http.StatusUnauthorized,
	"invalid_api_key":         http.StatusUnauthorized,
	"permissiondeniederror":   http.StatusForbidden,
	"permission_error":        http.StatusForbidden,
	"notfounderror":           http.StatusNotFound,
	"not_found_error":         http.StatusNotFound,
	"model_not_found":         http.StatusNotFound,
	"ratelimiterror":          http.StatusTooManyRequests,
	"rate_limit_error":        http.StatusTooManyRequests,
	"rate_limit_exceeded":     http.StatusTooManyRequests,
	"insufficient_quota":      http.StatusTooManyRequests,
	"internalservererror":     http.StatusInternalServerError,
	"server_error":            http.StatusInternalServerError,
	"serviceunavailableerror": http.StatusServiceUnavailable,
}

// errorStatus is the HTTP status an in-stream error's code and type stand
// for: the code when it is a number (or a numeric string) from 400 to 599,
// else the status the code's name, then the type's, is known by; 0 when
// neither says.
func errorStatus(code, typ string) int {
	if n, err := strconv.Atoi(code); err == nil {
		if n >= 400 && n <= 599 {
			return n
		}
		return 0
	}
	if s, ok := errorNameStatus[strings.ToLower(code)]; ok {
		return s
	}
	return errorNameStatus[strings.ToLower(typ)]
}

// errorCode is an error object's raw "code" as text: a number's digits or
// a string's value; empty for none, null or anything else.
func errorCode(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clean(s)
	}
	return ""
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
		s = cutWords(s, maxErrorMessage)
	}
	return s
}

// cutWords cuts s to at most n bytes (plus an ellipsis): at the last space
// in the final quarter of the bound when there is one, so no word is
// halved, else at a rune boundary.
func cutWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if sp := strings.LastIndexByte(s[:cut], ' '); sp >= n*3/4 {
		cut = sp
	}
	return strings.TrimRight(s[:cut], " ,;:") + "..."
}
