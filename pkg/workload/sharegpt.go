package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/hashicorp/go-hclog"
)

// ShareGPTConfig selects and shapes conversations from a ShareGPT file.
type ShareGPTConfig struct {
	// Seed drives the shuffle and think-time draws.
	Seed int64
	// Shuffle shuffles the filtered conversations by Seed before
	// MaxConversations takes its share, as vLLM's benchmark does with
	// random.seed + random.shuffle. The permutation is Go's (PCG), so the
	// same seed does not pick the same conversations as vLLM.
	Shuffle bool
	// MaxConversations keeps the first N conversations after filtering
	// (and shuffling); 0 keeps all. Without Shuffle, reading stops once N
	// are found.
	MaxConversations int
	// MinMessages drops conversations whose "conversations" array holds
	// fewer messages (of any role); 0 keeps all. vLLM uses 2.
	MinMessages int
	// MaxTurns caps the user turns taken from one conversation; 0 takes all.
	MaxTurns int
	// MaxTokens caps every turn's output; 0 leaves the run's default.
	MaxTokens int
	// OutputLen sets each turn's MaxTokens to the cl100k token count of the
	// dataset's reply to it (at least 1), as vLLM's ShareGPT sampling sets
	// output_len; MaxTokens, when set, caps it. A turn with no reply in the
	// file keeps the run's default.
	OutputLen bool
	// Think is the pause before each turn after the first.
	Think ThinkTime
}

// Validate reports settings that cannot work.
func (c ShareGPTConfig) Validate() error {
	switch {
	case c.MaxConversations < 0:
		return errors.New("sharegpt: max conversations is negative")
	case c.MinMessages < 0:
		return errors.New("sharegpt: min messages is negative")
	case c.MaxTurns < 0:
		return errors.New("sharegpt: max turns is negative")
	case c.MaxTokens < 0:
		return errors.New("sharegpt: max tokens is negative")
	}
	return c.Think.Validate()
}

// ErrShareGPT is matched (errors.Is) by every ShareGPT parse error.
var ErrShareGPT = errors.New("invalid sharegpt file")

// ShareGPTError says where a ShareGPT file is malformed.
type ShareGPTError struct {
	// Offset is the byte offset in the input of the problem, -1 if unknown.
	Offset int64
	// Line and Column (1-based) locate Offset; 0 when unknown. LoadShareGPT
	// fills them by rescanning the file; ParseShareGPT cannot rewind.
	Line, Column int
	// Entry is the 0-based index of the array element, -1 outside one.
	Entry int
	// ID is the element's "id" when it could be read.
	ID string
	// Err is the underlying problem.
	Err error
}

func (e *ShareGPTError) Error() string {
	var sb strings.Builder
	sb.WriteString("sharegpt: ")
	if e.Line > 0 {
		fmt.Fprintf(&sb, "line %d column %d (byte %d): ", e.Line, e.Column, e.Offset)
	} else if e.Offset >= 0 {
		fmt.Fprintf(&sb, "byte %d: ", e.Offset)
	}
	if e.Entry >= 0 {
		fmt.Fprintf(&sb, "conversation #%d", e.Entry)
		if e.ID != "" {
			fmt.Fprintf(&sb, " (id %q)", e.ID)
		}
		sb.WriteString(": ")
	}
	sb.WriteString(e.Err.Error())
	return sb.String()
}

// Unwrap makes errors.Is match ErrShareGPT and the underlying error.
func (e *ShareGPTError) Unwrap() []error { return []error{ErrShareGPT, e.Err} }

type sgMessage struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

type sgEntry struct {
	ID            json.RawMessage `json:"id"`
	Conversations []sgMessage     `json:"conversations"`
}

type sgConv struct {
	id     string
	system string
	users  []string
	// replies holds the dataset reply after each user turn while loading
	// (only with OutputLen); outLen its token count afterwards.
	replies []string
	outLen  []int
}

// ShareGPT is a Source of conversations whose user turns come from a ShareGPT
// file; assistant turns come from the live model. It is immutable after
// construction and safe for concurrent use.
type ShareGPT struct {
	cfg   ShareGPTConfig
	convs []sgConv
}

var _ Source = (*ShareGPT)(nil)

// ShareGPTStats counts what loading kept and dropped.
type ShareGPTStats struct {
	Entries      int // array elements read
	Kept         int // conversations in the source
	Filtered     int // dropped by MinMessages or for having no user message
	UnknownRoles int // messages skipped for a role not listed in the docs
}

// ParseShareGPT reads a ShareGPT JSON array from r:
//
//	[{"id": "...", "conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]
//
// Roles "human" and "user" are user turns; "gpt", "assistant", "chatgpt" and
// "bard" are replies (dropped: the live model answers); "system" becomes the
// system prompt (several are joined by a blank line); other roles are skipped
// and counted. Empty user messages are skipped. The file is decoded one
// element at a time and only user turns are kept, so memory stays near the
// size of the user text, not the file. Errors are *ShareGPTError.
func ParseShareGPT(r io.Reader, cfg ShareGPTConfig, logger hclog.Logger) (*ShareGPT, ShareGPTStats, error) {
	var st ShareGPTStats
	if err := cfg.Validate(); err != nil {
		return nil, st, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	fail := func(off int64, entry int, id string, err error) error {
		return &ShareGPTError{Offset: off, Entry: entry, ID: id, Err: err}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, st, fail(dec.InputOffset(), -1, "", describeTopErr(err, "expected a JSON array"))
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, st, fail(0, -1, "", fmt.Errorf("expected a JSON array, found %s", describeToken(tok)))
	}
	var convs []sgConv
	stopEarly := !cfg.Shuffle && cfg.MaxConversations > 0
	for dec.More() {
		if stopEarly && len(convs) == cfg.MaxConversations {
			break
		}
		entry := st.Entries
		st.Entries++
		before := dec.InputOffset()
		if off, c, ok := peekElement(dec, before, entry > 0); ok && c != '{' {
			return nil, st, fail(off, entry, "", fmt.Errorf("expected an object, found %s", kindOf([]byte{c})))
		}
		var e sgEntry
		if err := dec.Decode(&e); err != nil {
			return nil, st, fail(decodeOffset(err, dec, before, entry > 0), entry, idString(e.ID), describeEntryErr(err))
		}
		id := idString(e.ID)
		c, unknown := shareGPTConv(id, e.Conversations, cfg)
		st.UnknownRoles += unknown
		if len(c.users) == 0 || len(e.Conversations) < cfg.MinMessages {
			st.Filtered++
			continue
		}
		convs = append(convs, c)
	}
	if !stopEarly || len(convs) < cfg.MaxConversations {
		if _, err := dec.Token(); err != nil {
			return nil, st, fail(syntaxOffset(err, dec), -1, "", describeTopErr(err, "unterminated array"))
		}
		if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
			what := "invalid data"
			if err == nil {
				what = describeToken(tok)
			}
			return nil, st, fail(dec.InputOffset(), -1, "", fmt.Errorf("trailing %s after the array", what))
		}
	}
	if len(convs) == 0 {
		return nil, st, fail(-1, -1, "", errors.New("no conversations with a user message left after filtering"))
	}
	if cfg.Shuffle {
		rng := seedRand(cfg.Seed, streamShuffle)
		rng.Shuffle(len(convs), func(i, j int) { convs[i], convs[j] = convs[j], convs[i] })
	}
	if cfg.MaxConversations > 0 && len(convs) > cfg.MaxConversations {
		clear(convs[cfg.MaxConversations:])
		convs = convs[:cfg.MaxConversations:cfg.MaxConversations]
	}
	if cfg.OutputLen {
		for i := range convs {
			c := &convs[i]
			c.outLen = make([]int, len(c.replies))
			for k, r := range c.replies {
				if r != "" {
					c.outLen[k] = max(1, Count(r))
				}
			}
			c.replies = nil
		}
	}
	st.Kept = len(convs)
	logger.Debug("loaded sharegpt", "entries", st.Entries, "kept", st.Kept, "filtered", st.Filtered)
	if st.UnknownRoles > 0 {
		logger.Warn("skipped sharegpt messages with unknown roles", "count", st.UnknownRoles)
	}
	return &ShareGPT{cfg: cfg, convs: convs}, st, nil
}

// LoadShareGPT opens path and parses it with ParseShareGPT. On a parse error
// it rescans the file to add the line and column to the *ShareGPTError.
func LoadShareGPT(path string, cfg ShareGPTConfig, logger hclog.Logger) (*ShareGPT, ShareGPTStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ShareGPTStats{}, fmt.Errorf("open sharegpt file: %w", err)
	}
	defer f.Close()
	s, st, err := ParseShareGPT(f, cfg, logger)
	var se *ShareGPTError
	if errors.As(err, &se) && se.Offset >= 0 {
		if _, serr := f.Seek(0, io.SeekStart); serr == nil {
			se.Line, se.Column = lineColumn(f, se.Offset)
		}
	}
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	return s, st, nil
}

// lineColumn returns the 1-based line and column (in bytes) of offset in r.
func lineColumn(r io.Reader, offset int64) (line, col int) {
	line, col = 1, 1
	buf := make([]byte, 64<<10)
	var pos int64
	for pos < offset {
		n, err := r.Read(buf[:min(int64(len(buf)), offset-pos)])
		for _, b := range buf[:n] {
			if b == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		pos += int64(n)
		if err != nil {
			break
		}
	}
	return line, col
}

// shareGPTConv keeps the user turns (and, for OutputLen, the replies) of one
// element and returns how many messages had an unknown role.
func shareGPTConv(id string, msgs []sgMessage, cfg ShareGPTConfig) (sgConv, int) {
	c := sgConv{id: id}
	unknown := 0
	var systems []string
	for _, m := range msgs {
		switch strings.ToLower(m.From) {
		case "human", "user":
			if strings.TrimSpace(m.Value) == "" {
				continue
			}
			if cfg.MaxTurns > 0 && len(c.users) == cfg.MaxTurns {
				continue
			}
			c.users = append(c.users, m.Value)
			if cfg.OutputLen {
				c.replies = append(c.replies, "")
			}
		case "gpt", "assistant", "chatgpt", "bard":
			// The reply to a user turn is the first reply after it.
			if cfg.OutputLen && len(c.users) > 0 && len(c.replies) == len(c.users) && c.replies[len(c.replies)-1] == "" {
				c.replies[len(c.replies)-1] = m.Value
			}
		case "system":
			if strings.TrimSpace(m.Value) != "" {
				systems = append(systems, m.Value)
			}
		default:
			unknown++
		}
	}
	c.system = strings.Join(systems, "\n\n")
	return c, unknown
}

func idString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// syntaxOffset returns the 0-based input offset of the byte a decoder error
// is about. A json.Decoder's SyntaxError.Offset counts only the bytes its
// value scanner has seen, which leaves out the delimiters Token and More
// consumed, so it is not an input offset. After a failed read the decoder
// has not moved past the value's start and still holds the offending bytes,
// so decoding its buffer again with a fresh decoder gives the offset relative
// to that start.
func syntaxOffset(err error, dec *json.Decoder) int64 {
	base := dec.InputOffset()
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return base
	}
	var raw json.RawMessage
	if ferr := json.NewDecoder(dec.Buffered()).Decode(&raw); errors.As(ferr, &se) && se.Offset > 0 {
		return base + se.Offset - 1
	}
	return base
}

// decodeOffset locates an error from Decode of an array element. before is
// InputOffset just before the call: at the element for the first one, at the
// separating comma (which More stops on) for later ones. Type errors come
// after the decoder moved past the element; their Offset counts from where
// the element's read began, just past that comma.
func decodeOffset(err error, dec *json.Decoder, before int64, afterComma bool) int64 {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if afterComma {
			before++
		}
		return before + te.Offset
	}
	return syntaxOffset(err, dec)
}

// peekElement returns the offset and first byte of the next array element
// from the decoder's buffer without consuming it; ok is false when the buffer
// does not reach it yet.
func peekElement(dec *json.Decoder, before int64, afterComma bool) (int64, byte, bool) {
	var buf [64]byte
	n, _ := dec.Buffered().Read(buf[:])
	b := buf[:n]
	if afterComma {
		if len(b) == 0 || b[0] != ',' {
			return 0, 0, false
		}
		b = b[1:]
	}
	for i, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return before + int64(n-len(b)+i), c, true
	}
	return 0, 0, false
}

func describeEntryErr(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("expected an object, found %s", te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: want %s, found JSON %s", te.Field, te.Type, te.Value)
	}
	return describeTopErr(err, "truncated array element")
}

func describeTopErr(err error, eof string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New(eof)
	}
	return err
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// Name returns "sharegpt".
func (s *ShareGPT) Name() string { return "sharegpt" }

// Len returns the number of conversations kept.
func (s *ShareGPT) Len() int { return len(s.convs) }

// Conversation returns conversation i mod Len.
func (s *ShareGPT) Conversation(i int) Conversation {
	return &sgConversation{src: s, index: i, c: &s.convs[wrap(i, len(s.convs))]}
}

type sgConversation struct {
	src   *ShareGPT
	index int
	c     *sgConv
}

func (c *sgConversation) Index() int     { return c.index }
func (c *sgConversation) System() string { return c.c.system }
func (c *sgConversation) Turns() int     { return len(c.c.users) }

// ID returns the conversation's id in the file.
func (c *sgConversation) ID() string { return c.c.id }

func (c *sgConversation) Next(ctx context.Context, k int, _ []openai.Message) (Turn, error) {
	if err := ctx.Err(); err != nil {
		return Turn{}, err
	}
	if k < 0 || k >= len(c.c.users) {
		return Turn{}, fmt.Errorf("%w: turn %d of %d", ErrTurnRange, k, len(c.c.users))
	}
	cfg := &c.src.cfg
	t := Turn{User: c.c.users[k], MaxTokens: cfg.MaxTokens, ThinkTime: cfg.Think.At(cfg.Seed, c.index, k)}
	if c.c.outLen != nil {
		t.MaxTokens = c.c.outLen[k]
		if cfg.MaxTokens > 0 {
			t.MaxTokens = min(t.MaxTokens, cfg.MaxTokens)
		}
	}
	return t, nil
}
