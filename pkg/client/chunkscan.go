package client

import (
	"strings"
	"unicode/utf8"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// The fast path decodes the chunks every server sends thousands of times a
// second, a content delta, a finish reason, the usage, without
// encoding/json's reflection, and gives up on anything unusual: an error
// object, a duplicate or case-variant key, a string with invalid UTF-8 or a
// lone surrogate, a number that is not a plain integer, a value of an
// unexpected type, invalid JSON, deep nesting. The caller then resets the
// chunk and decodes it with encoding/json, so the fast path never decides
// anything encoding/json would decide differently. FuzzChunkFastPath checks
// that whatever it accepts, encoding/json decodes to the same chunk.

// maxScanDepth bounds the nesting of skipped values; deeper input goes to
// encoding/json.
const maxScanDepth = 32

// Key sets per object level, for the case-variant check: encoding/json
// matches keys case-insensitively, so "Content" would fill Content.
var (
	chunkKeys   = newKeySet("object", "message", "type", "choices", "usage", "error", "code")
	choiceKeys  = newKeySet("delta", "text", "finish_reason")
	deltaKeys   = newKeySet("content", "reasoning_content", "reasoning")
	usageKeys   = newKeySet("prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details")
	detailsKeys = newKeySet("cached_tokens")
)

// keySet is the known keys of one object level (at most 8, each shorter
// than 64 bytes) with the set of their lengths: most keys a server sends
// that the client does not read ("id", "model", "index") have a length no
// known key has, and are told apart without comparing bytes.
type keySet struct {
	keys []string
	lens uint64 // bit n is set when a key is n bytes long
}

func newKeySet(keys ...string) *keySet {
	ks := &keySet{keys: keys}
	for _, k := range keys {
		if len(k) >= 64 || len(keys) > 8 {
			panic("chunkscan: a key set holds at most 8 keys shorter than 64 bytes")
		}
		ks.lens |= 1 << len(k)
	}
	return ks
}

// hasLen reports whether a known key is n bytes long.
func (ks *keySet) hasLen(n int) bool { return n < 64 && ks.lens&(1<<n) != 0 }

// scanner reads one JSON text from b. Every method reports false on input
// it does not handle; the scanner is then abandoned.
type scanner struct {
	b []byte
	i int
	// The token strings decoded (content, reasoning_content, reasoning,
	// text; null ones not counted) and the last one's span and field, for
	// chunkShape.
	tokens           int
	tokStart, tokEnd int
	tokKind          tokenKind
}

// parseFast decodes data into c, which must have been reset, and reports
// whether it could; on false c holds a partial decode and must be reset
// before encoding/json decodes data into it.
func (c *wireChunk) parseFast(data []byte) bool {
	s := scanner{b: data}
	ok := c.scan(&s)
	if ok && s.tokens == 1 && len(c.Choices) == 1 {
		c.shape.learn(data, s.tokStart, s.tokEnd, s.tokKind)
	}
	return ok
}

// scan is parseFast's decode.
func (c *wireChunk) scan(s *scanner) bool {
	s.space()
	ok := s.object(chunkKeys, func(key []byte) bool {
		switch string(key) {
		case "object":
			// Raw bytes, as json.RawMessage keeps them; only a string
			// is taken here.
			start := s.i
			if !s.peek('"') || !s.skip(0) {
				return false
			}
			c.Object = append(c.Object[:0], s.b[start:s.i]...)
			return true
		case "choices":
			return s.choices(c)
		case "usage":
			if s.null() {
				c.Usage = nil
				return true
			}
			c.Usage = new(openai.Usage)
			return s.usage(c.Usage)
		default: // error, message, type, code: an error chunk, left to encoding/json
			return false
		}
	})
	s.space()
	return ok && s.i == len(s.b)
}

func (s *scanner) choices(c *wireChunk) bool {
	if !s.consume('[') {
		return false
	}
	c.Choices = c.Choices[:0]
	s.space()
	if s.consume(']') {
		return true
	}
	for {
		c.Choices = append(c.Choices, wireChoice{})
		ch := &c.Choices[len(c.Choices)-1]
		ok := s.object(choiceKeys, func(key []byte) bool {
			switch string(key) {
			case "delta":
				if s.null() {
					return true
				}
				d := &ch.Delta
				return s.object(deltaKeys, func(key []byte) bool {
					switch string(key) {
					case "content":
						return s.tokenField(&d.Content, tokenContent)
					case "reasoning_content":
						return s.tokenField(&d.ReasoningContent, tokenReasoningContent)
					default: // reasoning
						return s.tokenField(&d.Reasoning, tokenReasoning)
					}
				})
			case "text":
				return s.tokenField(&ch.Text, tokenText)
			default: // finish_reason
				return s.stringField(&ch.FinishReason)
			}
		})
		if !ok {
			return false
		}
		s.space()
		if s.consume(']') {
			return true
		}
		if !s.consume(',') {
			return false
		}
		s.space()
	}
}

func (s *scanner) usage(u *openai.Usage) bool {
	return s.object(usageKeys, func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return s.intField(&u.PromptTokens)
		case "completion_tokens":
			return s.intField(&u.CompletionTokens)
		case "total_tokens":
			return s.intField(&u.TotalTokens)
		default: // prompt_tokens_details
			if s.null() {
				u.PromptTokensDetails = nil
				return true
			}
			d := new(openai.PromptTokensDetails)
			u.PromptTokensDetails = d
			return s.object(detailsKeys, func([]byte) bool { return s.intField(&d.CachedTokens) })
		}
	})
}

// object reads an object whose known keys are keys (at most 8). It calls
// field, positioned at the value, for each known key, and skips the values
// of other keys. A duplicate known key, or an unknown key that equals a
// known one but for case or contains non-ASCII bytes (encoding/json folds
// Unicode case), stops the scan.
func (s *scanner) object(keys *keySet, field func(key []byte) bool) bool {
	if !s.consume('{') {
		return false
	}
	var seen uint8
	s.space()
	if s.consume('}') {
		return true
	}
	for {
		key, ok := s.key()
		if !ok {
			return false
		}
		s.space()
		if !s.consume(':') {
			return false
		}
		s.space()
		k := index(keys, key)
		switch {
		case k >= 0:
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
			if !field(key) {
				return false
			}
		case foldsToAny(keys, key):
			return false
		default:
			if !s.skip(0) {
				return false
			}
		}
		s.space()
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
		s.space()
	}
}

func index(keys *keySet, key []byte) int {
	if !keys.hasLen(len(key)) {
		return -1
	}
	for i, k := range keys.keys {
		if k == string(key) {
			return i
		}
	}
	return -1
}

// foldsToAny reports whether key could match a known key under
// encoding/json's case folding: it equals one but for ASCII case, or it
// has non-ASCII bytes (Unicode folding may change the length, as "ſ" folds
// to "s").
func foldsToAny(keys *keySet, key []byte) bool {
	for _, b := range key {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	if !keys.hasLen(len(key)) {
		return false // ASCII folding keeps the length
	}
	for _, k := range keys.keys {
		// The first letters first: "model" and "usage" differ there.
		if len(k) == len(key) && k[0]|0x20 == key[0]|0x20 && strings.EqualFold(k, string(key)) {
			return true
		}
	}
	return false
}

// key reads an object key without escapes and returns its bytes.
func (s *scanner) key() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// stringField reads a string into *dst; null leaves *dst as it is, as
// encoding/json does.
func (s *scanner) stringField(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str()
	*dst = v
	return ok
}

// tokenField is stringField for the fields that carry a token's text; it
// counts the strings and keeps the span of the last one.
func (s *scanner) tokenField(dst *string, k tokenKind) bool {
	if s.null() {
		return true
	}
	start := s.i
	v, ok := s.str()
	*dst = v
	s.tokens++
	s.tokStart, s.tokEnd, s.tokKind = start, s.i, k
	return ok
}

// str reads a string value, decoding escapes.
func (s *scanner) str() (string, bool) {
	if !s.consume('"') {
		return "", false
	}
	start := s.i
	ascii := true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			return string(raw), true
		case c == '\\':
			s.i = start
			return s.unescape()
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// unescape reads the rest of a string that has escapes, from just after
// its opening quote.
func (s *scanner) unescape() (string, bool) {
	var out []byte
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			seg := s.b[start:s.i]
			s.i++
			if !utf8.Valid(seg) {
				return "", false
			}
			return string(append(out, seg...)), true
		case c < 0x20:
			return "", false
		case c != '\\':
			s.i++
			continue
		}
		seg := s.b[start:s.i]
		if !utf8.Valid(seg) {
			return "", false
		}
		out = append(out, seg...)
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if 0xd800 <= r && r < 0xdc00 {
				// A high surrogate must be followed by a low one.
				if s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
					return "", false
				}
				s.i += 2
				lo, ok := s.hex4()
				if !ok || lo < 0xdc00 || lo >= 0xe000 {
					return "", false
				}
				r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
			} else if 0xdc00 <= r && r < 0xe000 {
				return "", false
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
		start = s.i
	}
	return "", false
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		v, ok := hexValue(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	s.i += 4
	return r, true
}

// hexValue is the value of the hexadecimal digit c (either case).
func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// intField reads a plain integer (no fraction or exponent, at most 9
// digits, so it fits any int) into *dst; null leaves *dst as it is.
func (s *scanner) intField(dst *int) bool {
	if s.null() {
		return true
	}
	neg := s.consume('-')
	start := s.i
	var v int
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		v = v*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 9 || (digits > 1 && s.b[start] == '0') {
		return false
	}
	if s.i < len(s.b) {
		if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	if neg {
		v = -v
	}
	*dst = v
	return true
}

// skip reads over any valid JSON value, nesting at most maxScanDepth deep.
func (s *scanner) skip(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; c {
	case '{':
		s.i++
		s.space()
		if s.consume('}') {
			return true
		}
		for {
			if !s.peek('"') || !s.skipString() {
				return false
			}
			s.space()
			if !s.consume(':') {
				return false
			}
			s.space()
			if !s.skip(depth + 1) {
				return false
			}
			s.space()
			if s.consume('}') {
				return true
			}
			if !s.consume(',') {
				return false
			}
			s.space()
		}
	case '[':
		s.i++
		s.space()
		if s.consume(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			s.space()
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
			s.space()
		}
	case '"':
		return s.skipString()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.skipNumber()
	}
}

// skipString reads over a string, checking its escapes.
func (s *scanner) skipString() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			e := s.b[s.i+1]
			s.i += 2
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := s.hex4(); !ok {
					return false
				}
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

// skipNumber reads over a number as JSON's grammar defines it.
func (s *scanner) skipNumber() bool {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.digits() == 0:
		return false
	}
	if s.consume('.') && s.digits() == 0 {
		return false
	}
	if s.consume('e') || s.consume('E') {
		if !s.consume('+') {
			s.consume('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// null reads null if it is next.
func (s *scanner) null() bool {
	return s.peek('n') && s.literal("null")
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

func (s *scanner) consume(c byte) bool {
	if s.peek(c) {
		s.i++
		return true
	}
	return false
}
