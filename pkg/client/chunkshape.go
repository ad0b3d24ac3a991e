package client

import (
	"bytes"
	"unicode/utf8"
)

// A stream's token chunks differ from one another only in the token's
// text: the id, model, created time, index and null finish reason repeat
// byte for byte. chunkShape keeps the bytes of the last chunk the fast path
// decoded around its one token string; a chunk whose bytes before and after
// that string are the same, and whose middle is exactly one JSON string,
// decodes to the same chunk with only that string changed. JSON's grammar
// is context free, so equal bytes before a value leave the scanner in the
// same state, and equal bytes after a complete string end it in the same
// way. The check is two memory comparisons and the string's scan instead
// of a walk over every key (BenchmarkTokenEvent). FuzzChunkShape checks
// every accepted chunk against encoding/json.

// maxShapeBytes is the largest chunk a shape is kept for; a token chunk is
// a few hundred bytes.
const maxShapeBytes = 1 << 10

// tokenKind is the field a token string fills.
type tokenKind uint8

const (
	tokenContent tokenKind = iota
	tokenReasoningContent
	tokenReasoning
	tokenText
)

// chunkShape is the last decoded token chunk's bytes and the span of its
// token string (quotes included): prev[:start] and prev[end:] are what the
// next chunk must repeat.
type chunkShape struct {
	prev       []byte
	start, end int
	kind       tokenKind
	ok         bool
}

// learn keeps data, whose one token string (a string of kind k in its only
// choice) spans data[start:end].
func (sh *chunkShape) learn(data []byte, start, end int, k tokenKind) {
	if len(data) > maxShapeBytes {
		return
	}
	sh.prev = append(sh.prev[:0], data...)
	sh.start, sh.end, sh.kind, sh.ok = start, end, k, true
}

// shapeOf reports whether data has c's shape, and returns a scanner over
// data up to the bytes after the token string, at the token's value.
func (c *wireChunk) shapeOf(data []byte) (scanner, bool) {
	sh := &c.shape
	if !sh.ok || len(c.Choices) != 1 {
		return scanner{}, false
	}
	tail := len(sh.prev) - sh.end
	if len(data) < sh.start+2+tail ||
		!bytes.Equal(data[:sh.start], sh.prev[:sh.start]) ||
		!bytes.Equal(data[len(data)-tail:], sh.prev[sh.end:]) {
		return scanner{}, false
	}
	return scanner{b: data[:len(data)-tail], i: sh.start}, true
}

// matchToken reports whether data has the shape of the chunk c was last
// decoded from by the fast path (c must not have been changed since): the
// same bytes but for the token string. When it does and the string has no
// escape, it returns the token's text as the bytes it has in data (empty,
// not nil, for ""), for the caller to use before data changes, and c's
// token field keeps its last value; any other token string is decoded
// into c's token field and text is nil. When ok is false nothing changed.
func (c *wireChunk) matchToken(data []byte) (text []byte, ok bool) {
	s, ok := c.shapeOf(data)
	if !ok {
		return nil, false
	}
	if b := s.b[s.i:]; len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if t := b[1 : len(b)-1]; plainString(t) {
			return t, true
		}
	}
	v, ok := s.str()
	if !ok || s.i != len(s.b) {
		return nil, false
	}
	c.setToken(v)
	return nil, true
}

// plainString reports whether b, the inside of a JSON string, is its own
// text: no quote, backslash or control byte, and valid UTF-8.
func plainString(b []byte) bool {
	ascii := true
	for _, ch := range b {
		switch {
		case ch == '"' || ch == '\\' || ch < 0x20:
			return false
		case ch >= utf8.RuneSelf:
			ascii = false
		}
	}
	return ascii || utf8.Valid(b)
}

// setToken puts the token's text v in the field the shape's token fills.
func (c *wireChunk) setToken(v string) {
	sh := &c.shape
	ch := &c.Choices[0]
	switch sh.kind {
	case tokenContent:
		ch.Delta.Content = v
	case tokenReasoningContent:
		ch.Delta.ReasoningContent = v
	case tokenReasoning:
		ch.Delta.Reasoning = v
	default:
		ch.Text = v
	}
}
