// Package sse reads Server-Sent Events (the text/event-stream format) from
// an io.Reader with bounded memory. It owns the event-stream framing only:
// what a data line means (an OpenAI chunk) is pkg/client's. It imports no
// other fleetbench package and does no I/O beyond the reader it is given.
//
// The reader follows the WHATWG event-stream parsing rules: comment lines
// (":..."), multi-line data joined with "\n", the event, id and retry fields,
// CRLF, CR and LF line endings, one optional space after the colon and a
// leading byte-order mark. Input may be split across reads at any byte.
//
// Memory is bounded: a Reader starts with a small buffer and grows it only as
// long lines demand, up to the limit given to NewReader. A longer line or a
// larger event fails with ErrLineTooLong or ErrEventTooLong instead of
// buffering it.
package sse
