package client

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// bodyTemplate builds request bodies. The fields that are the same for every
// request are encoded once, in New; a request adds only max_tokens and its
// messages or prompt. It is immutable after New and safe for concurrent use.
type bodyTemplate struct {
	chat         bool
	prefix       []byte // `{"model":...` and every fixed field, no closing brace
	maxTokens    int
	setMaxTokens bool // false when ExtraBody supplies max_tokens
	esc          escapeCache
}

// newBodyTemplate encodes the fixed part of the body. Fields named in
// ExtraBody are left out and ExtraBody's value is sent instead.
func newBodyTemplate(cfg Config) (*bodyTemplate, error) {
	extra, err := parseExtraBody(cfg.ExtraBody)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	field := func(key string, value []byte) {
		if _, ok := extra[key]; ok {
			return
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(key)) // keys are fixed ASCII names
		b.WriteByte(':')
		b.Write(value)
	}
	model, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, err
	}
	field("model", model)
	field("stream", []byte("true"))
	field("stream_options", []byte(`{"include_usage":true}`))
	if cfg.MinTokens != nil {
		field("min_tokens", strconv.AppendInt(nil, int64(*cfg.MinTokens), 10))
	}
	if cfg.IgnoreEOS {
		field("ignore_eos", []byte("true"))
	}
	if cfg.Temperature != nil {
		t, err := json.Marshal(*cfg.Temperature)
		if err != nil {
			return nil, err
		}
		field("temperature", t)
	}
	if cfg.Seed != nil {
		field("seed", strconv.AppendInt(nil, *cfg.Seed, 10))
	}
	// Sorted so the body is the same on every run.
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		var v bytes.Buffer
		if err := json.Compact(&v, extra[k]); err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(key)
		b.WriteByte(':')
		b.Write(v.Bytes())
	}
	_, extraMax := extra["max_tokens"]
	return &bodyTemplate{
		chat:         cfg.Endpoint == EndpointChat,
		prefix:       b.Bytes(),
		maxTokens:    cfg.MaxTokens,
		setMaxTokens: !extraMax,
	}, nil
}

// size returns an upper bound of the body of req that is exact unless a
// string needs escaping, so that build rarely grows its buffer.
func (t *bodyTemplate) size(req *Request) int {
	n := len(t.prefix) + len(req.Prompt) + 64
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Role) + 32
	}
	return n
}

// build appends the JSON body for req to dst and returns it. The chat
// endpoint sends req.Messages, or req.Prompt as one user message when
// Messages is empty; the completions endpoint sends req.Prompt, or the
// messages' contents joined by blank lines when Prompt is empty. Strings are
// escaped as encoding/json escapes them with SetEscapeHTML(false); build
// never fails.
func (t *bodyTemplate) build(dst []byte, req *Request) []byte {
	dst = append(dst, t.prefix...)
	if t.setMaxTokens {
		n := t.maxTokens
		if req.MaxTokens > 0 {
			n = req.MaxTokens
		}
		if n > 0 {
			dst = append(dst, `,"max_tokens":`...)
			dst = strconv.AppendInt(dst, int64(n), 10)
		}
	}
	if t.chat {
		dst = append(dst, `,"messages":[`...)
		if len(req.Messages) == 0 {
			dst = t.appendMessage(dst, openai.RoleUser, req.Prompt)
		}
		for i, m := range req.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = t.appendMessage(dst, m.Role, m.Content)
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, `,"prompt":"`...)
		if req.Prompt != "" || len(req.Messages) == 0 {
			dst = t.esc.appendEscaped(dst, req.Prompt)
		} else {
			for i, m := range req.Messages {
				if i > 0 {
					dst = append(dst, `\n\n`...)
				}
				dst = t.esc.appendEscaped(dst, m.Content)
			}
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendMessage appends {"role":...,"content":...} as encoding/json encodes
// an openai.Message.
func (t *bodyTemplate) appendMessage(dst []byte, role, content string) []byte {
	dst = append(dst, `{"role":`...)
	dst = appendString(dst, role)
	dst = append(dst, `,"content":"`...)
	dst = t.esc.appendEscaped(dst, content)
	return append(dst, `"}`...)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s escaped for a JSON string, without quotes, byte
// for byte as encoding/json does with SetEscapeHTML(false): the short
// escapes for '"', '\\', \b, \f, \n, \r and \t, \u00xx for other control
// characters, \ufffd for each invalid UTF-8 byte, and \u2028 and \u2029
// (JavaScript line terminators). FuzzAppendString checks it against
// encoding/json.
func appendEscaped(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Bodies are mostly long runs of plain ASCII (a document, the
		// history): skip them eight bytes at a time.
		for i+8 <= len(s) && plainWord(load64(s[i:])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// Masks for plainWord, one byte value repeated in each of eight bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load64 returns the first eight bytes of s as a little-endian word.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainWord reports whether the eight bytes of w are all printable ASCII
// other than '"' and '\\', which JSON copies as they are. A byte is flagged
// when its high bit is set (non-ASCII), when it is below 0x20, or when it
// equals '"' or '\\' (a zero byte after XOR); the zero and less-than tests
// are the classic SWAR ones, exact for "any byte".
func plainWord(w uint64) bool {
	q, bs := w^('"'*ones), w^('\\'*ones)
	return (w|(w-0x20*ones)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs == 0
}
