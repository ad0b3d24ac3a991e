package client

import "time"

// Class says why a request failed, in terms of what the user should do
// about it. The empty class means success. The set is closed and small so it
// can be a metric label and a TSV/JSON key.
type Class string

// Error classes. Each failed request has exactly one. The status classes are
// assigned in statusClass (errors.go), the transport ones (cancelled,
// timeout, tls, protocol, and the fallback connect or stream_cut) in
// classify (client.go), the stream ones in run.read and run.end (stream.go).
const (
	ClassOK Class = ""
	// ClassConnect: no response arrived because the connection failed: dial
	// refused or reset, a DNS failure, the server closing before it
	// answered. Check the URL and that the server is up.
	ClassConnect Class = "connect"
	// ClassTLS: the TLS handshake failed, e.g. a certificate nobody
	// vouches for (x509: unknown authority) or a wrong host name.
	ClassTLS Class = "tls"
	// ClassTimeout: fleetbench's connect, first-token or request timeout
	// fired, or the server answered 408 or 504.
	ClassTimeout Class = "timeout"
	// ClassBadRequest: 400; the server's reason (a context length
	// exceeded, an unknown parameter) is in Result.ServerMessage.
	ClassBadRequest Class = "bad_request"
	// ClassAuth: 401 or 403; check the API key and headers.
	ClassAuth Class = "auth"
	// ClassNotFound: 404; check the model name and the base URL's path.
	ClassNotFound Class = "not_found"
	// ClassRateLimited: 429; Result.RetryAfter holds the server's
	// Retry-After.
	ClassRateLimited Class = "rate_limited"
	// ClassHTTP4xx: any other non-200 status below 500 (a 3xx redirect
	// included: the client does not follow redirects).
	ClassHTTP4xx Class = "http_4xx"
	// ClassHTTP5xx: a 5xx status other than 504.
	ClassHTTP5xx Class = "http_5xx"
	// ClassProtocol: the server broke the protocol: malformed SSE or JSON,
	// an over-long line, an HTTP/2 protocol error, a 200 that is not an
	// event stream, or an error object inside the stream that names no
	// status (its message is in Result.ServerMessage). An in-stream error
	// whose code (or code or type name) stands for a status is classed as
	// a response of that status (StreamError.Class).
	ClassProtocol Class = "protocol"
	// ClassStreamCut: the stream ended (EOF, reset, GOAWAY) before [DONE]
	// or a finish reason.
	ClassStreamCut Class = "stream_cut"
	// ClassCancelled: the caller's context was cancelled.
	ClassCancelled Class = "cancelled"
)

// Classes lists every failure class in a fixed order for reports: no
// connection, no answer in time, the server's refusals, then failures inside
// the stream. It must not be modified.
var Classes = []Class{
	ClassConnect, ClassTLS, ClassTimeout,
	ClassBadRequest, ClassAuth, ClassNotFound, ClassRateLimited, ClassHTTP4xx, ClassHTTP5xx,
	ClassProtocol, ClassStreamCut, ClassCancelled,
}

// Result is the measurement of one streamed request. All durations are taken
// from one monotonic clock; Start is the instant just before the request was
// handed to the HTTP transport (so getting a connection is included), and
// every duration is measured from it.
//
// A Result is owned by the goroutine that made the request; it is not safe for
// concurrent mutation.
type Result struct {
	// Start is the instant just before the request was handed to the
	// transport.
	Start time.Time
	// TTFB is the time to the first byte of the response body (or headers
	// when the body is empty).
	TTFB time.Duration
	// TTFT is the time to the first chunk with non-empty content or reasoning
	// content. Zero when no such chunk arrived.
	TTFT time.Duration
	// E2E is the time to the end of the stream ([DONE] or EOF after a finish
	// reason), or to the failure.
	E2E time.Duration
	// ITL holds the gap between each content (or reasoning) chunk and the
	// previous one, starting with the second such chunk.
	ITL []time.Duration

	// Text is the assistant's content, concatenated; Reasoning the reasoning
	// content. History sent on later turns uses Text.
	Text      string
	Reasoning string

	// PromptTokens, OutputTokens and CachedTokens come from the server's
	// usage when UsageReported; otherwise OutputTokens counts content chunks
	// and the others are zero.
	PromptTokens  int
	OutputTokens  int
	CachedTokens  int
	UsageReported bool

	// FinishReason is the last non-empty finish_reason seen.
	FinishReason string
	// Status is the HTTP status code, 0 when no response arrived.
	Status int
	// Worker is the value of the response header that names the serving
	// worker, when the server sends one; WorkerHeader is that header's
	// name as configured (one of WorkerHeaders), "" when none named it.
	Worker       string
	WorkerHeader string
	// ConnReused reports whether the request went out on a pooled
	// connection; false means Start..TTFB included opening one.
	ConnReused bool

	// ServerMessage is the server's own reason for a failure: the message
	// of a non-200 response's error body (OpenAI's {"error":{"message":...}},
	// vLLM's {"object":"error","message":...}, or its text), or of an error
	// object inside the stream. It is taken from a bounded prefix of the
	// body, cleaned to one line and scrubbed of the client's credentials.
	// Empty when the server gave no reason.
	ServerMessage string
	// RetryAfter is the Retry-After header of a non-200 response (seconds
	// or an HTTP date, as sent, cleaned), when it has one: typically a 429
	// or a 503.
	RetryAfter string

	// Class is ClassOK on success; Err then is nil. Err's text includes
	// ServerMessage and RetryAfter.
	Class Class
	Err   error
}

// OK reports whether the request succeeded.
func (r *Result) OK() bool { return r.Class == ClassOK && r.Err == nil }

// TPOT is the mean time per output token after the first:
// (E2E - TTFT) / (OutputTokens - 1). It is zero when fewer than two tokens
// were produced or no content arrived.
func (r *Result) TPOT() time.Duration {
	if r.OutputTokens < 2 || r.TTFT <= 0 || r.E2E < r.TTFT {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}
