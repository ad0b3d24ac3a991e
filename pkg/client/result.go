package client

import "time"

// Class says why a request failed. The empty class means success. The set is
// closed and small so it can be a metric label and a histogram key.
type Class string

// Error classes. Each failed request has exactly one.
const (
	ClassOK          Class = ""
	ClassConnect     Class = "connect"      // dial, TLS or connection refused/reset before a response
	ClassTimeout     Class = "timeout"      // connect, first-token or whole-request timeout
	ClassHTTP4xx     Class = "http_4xx"     // non-200 response with a 4xx status (429 included)
	ClassHTTP5xx     Class = "http_5xx"     // non-200 response with a 5xx status
	ClassStreamError Class = "stream_error" // malformed SSE or JSON, an error object in the stream, an over-long line
	ClassTruncated   Class = "truncated"    // the stream ended (EOF, reset) before [DONE] or a finish reason
	ClassCancelled   Class = "cancelled"    // the caller's context was cancelled
)

// Classes lists every failure class in a fixed order for reports.
var Classes = []Class{ClassConnect, ClassTimeout, ClassHTTP4xx, ClassHTTP5xx, ClassStreamError, ClassTruncated, ClassCancelled}

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
	// worker, when the server sends one.
	Worker string
	// ConnReused reports whether the request went out on a pooled
	// connection; false means Start..TTFB included opening one.
	ConnReused bool

	// Class is ClassOK on success; Err then is nil.
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
