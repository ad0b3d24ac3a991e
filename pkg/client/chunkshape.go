package client

import (
	"bytes"
	"hash/maphash"
	"time"
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
	gen        uint32 // counts learn calls, for fastShape
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
	sh.gen++
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
	if t, ok := plainQuoted(s.b[s.i:]); ok {
		return t, true
	}
	v, ok := s.str()
	if !ok || s.i != len(s.b) {
		return nil, false
	}
	c.setToken(v)
	return nil, true
}

// plainQuoted returns the inside of b when b is one JSON string that
// needs no decoding: quotes at both ends and a plainString between them.
func plainQuoted(b []byte) ([]byte, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' || !plainString(b[1:len(b)-1]) {
		return nil, false
	}
	return b[1 : len(b)-1], true
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

// fastShape is a chunk shape that the event loops check without the chunk
// (loop_linux.go): the lengths of the bytes before and after the token
// string, and a keyed hash of each in place of the bytes. With thousands of
// streams each token finds its stream's state out of the cache, and the
// chunk, its choice and the previous chunk's bytes are half a dozen more
// lines to load; the hashes are computed over the new chunk, which is in
// the read buffer the loop has just filled. A chunk with other bytes
// outside its token passes only on a collision of the 64-bit hash
// (hash/maphash, seeded per process), 1 in 2^64.
type fastShape struct {
	pre, post   uint64 // the hashes of prev[:start] and prev[end:]
	start, tail int32  // len(prev[:start]), len(prev[end:])
	gen         uint32 // the chunkShape generation it was taken from
	ok          bool
}

// shapeSeed keys fastShape's hashes.
var shapeSeed = maphash.MakeSeed()

// follow keeps f in step with the chunk's shape after the run handled an
// event the usual way: the same shape as before stays (a chunk that took
// the shape path), a new one is learnt, and no shape (any other chunk)
// clears f. Only a content token's shape is kept: a reasoning token goes
// the usual way.
func (f *fastShape) follow(sh *chunkShape) {
	switch {
	case !sh.ok || (sh.kind != tokenContent && sh.kind != tokenText):
		f.ok = false
	case f.ok && f.gen == sh.gen:
	default:
		f.pre = maphash.Bytes(shapeSeed, sh.prev[:sh.start])
		f.post = maphash.Bytes(shapeSeed, sh.prev[sh.end:])
		f.start, f.tail, f.gen, f.ok = int32(sh.start), int32(len(sh.prev)-sh.end), sh.gen, true
	}
}

// fastToken handles the data of an event when its chunk has shape f and
// its token string no escape, as event would (a chunk of f's shape
// decodes to the chunk f was taken from with only the token changed, and
// that chunk's finish reason, usage and lack of error are already
// recorded), touching only the answer and its timing. It reports
// whether it took the event; if not, nothing changed. The first token
// goes the usual way (its TTFT).
func (t *tokens) fastToken(f *fastShape, data []byte, now time.Time) bool {
	start, tail := int(f.start), int(f.tail)
	if !f.ok || t.chunks == 0 || len(data) < start+2+tail {
		return false
	}
	text, ok := plainQuoted(data[start : len(data)-tail])
	if !ok ||
		maphash.Bytes(shapeSeed, data[:start]) != f.pre ||
		maphash.Bytes(shapeSeed, data[len(data)-tail:]) != f.post {
		return false
	}
	if len(text) > 0 {
		t.text = append(t.text, text...)
		t.add(now)
	}
	return true
}

// add counts a content chunk stamped now after the first: its gap to the
// last one goes to the ITL list.
func (t *tokens) add(now time.Time) {
	t.itl = append(t.itl, now.Sub(t.last))
	t.last = now
	t.chunks++
}
