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
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// ErrJSONL is wrapped by every JSONL parse error.
var ErrJSONL = errors.New("invalid jsonl workload")

// maxJSONLLine bounds one line, so a file with no newlines cannot make the
// reader buffer without limit.
const maxJSONLLine = 64 << 20

type jsonlTurn struct {
	User      string `json:"user"`
	MaxTokens *int   `json:"max_tokens"`
	ThinkMS   *int64 `json:"think_ms"`
}

type jsonlLine struct {
	ID     string      `json:"id"`
	System string      `json:"system"`
	Turns  []jsonlTurn `json:"turns"`
}

// scriptTurn is one parsed turn. maxTokens or think < 0 means "use the
// run's setting".
type scriptTurn struct {
	user      string
	maxTokens int
	think     time.Duration
}

type script struct {
	id     string
	system string
	turns  []scriptTurn
}

// JSONL is a Source replaying scripted conversations from fleetbench's own
// JSONL format, for exact replays (also described in docs/workloads.md). It is
// immutable after construction and safe for concurrent use.
//
// One conversation per line, UTF-8 JSON objects:
//
//	{"id":"c1","system":"You are terse.","turns":[{"user":"Hi"},{"user":"And then?","max_tokens":128,"think_ms":500}]}
//
// Fields:
//   - id (string, optional): a name for reports; must be unique when given.
//   - system (string, optional): the system prompt; "" or absent for none.
//   - turns (array, required, at least one): the user turns in order.
//   - turns[].user (string, required, non-empty): the user message.
//   - turns[].max_tokens (integer >= 0, optional): this turn's output cap;
//     0 means the server's default, absent means the run's --max-tokens.
//   - turns[].think_ms (integer >= 0, optional): the pause in milliseconds
//     before this turn; absent means the run's think-time setting. The first
//     turn has no think time, so a non-zero think_ms on it is an error.
//
// Blank lines are skipped. Unknown fields are errors, so a typo never goes
// unnoticed. Conversation i of the source is line-order conversation
// i mod the number of conversations. Assistant turns are not part of the file:
// they come from the live model at run time.
type JSONL struct {
	convs     []script
	seed      int64
	think     ThinkTime
	maxTokens int // for turns without max_tokens
}

var _ Source = (*JSONL)(nil)

// ParseJSONL reads the scripted format from r. Errors wrap ErrJSONL and name
// the 1-based line number. think is used for turns without think_ms; seed
// makes its draws deterministic.
func ParseJSONL(r io.Reader, seed int64, think ThinkTime) (*JSONL, error) {
	if err := think.Validate(); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	s := &JSONL{seed: seed, think: think}
	ids := map[string]int{}
	for line := 1; ; line++ {
		b, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: line %d: %w", ErrJSONL, line, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			c, perr := parseScript(b)
			if perr != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrJSONL, line, perr)
			}
			if c.id != "" {
				if prev, dup := ids[c.id]; dup {
					return nil, fmt.Errorf("%w: line %d: id %q already used on line %d", ErrJSONL, line, c.id, prev)
				}
				ids[c.id] = line
			}
			s.convs = append(s.convs, c)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(s.convs) == 0 {
		return nil, fmt.Errorf("%w: no conversations", ErrJSONL)
	}
	return s, nil
}

// LoadJSONL opens path and parses it with ParseJSONL.
func LoadJSONL(path string, seed int64, think ThinkTime) (*JSONL, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open jsonl workload: %w", err)
	}
	defer f.Close()
	s, err := ParseJSONL(f, seed, think)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readLine returns the next line without its newline, or io.EOF with the
// last (possibly empty) unterminated line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxJSONLLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxJSONLLine)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return buf, io.EOF
		default:
			return nil, err
		}
	}
}

func parseScript(b []byte) (script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l jsonlLine
	if err := dec.Decode(&l); err != nil {
		return script{}, describeJSONError(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return script{}, fmt.Errorf("column %d: trailing data after the JSON object", end+1)
	}
	if len(l.Turns) == 0 {
		return script{}, errors.New(`"turns" is missing or empty`)
	}
	c := script{id: l.ID, system: l.System, turns: make([]scriptTurn, len(l.Turns))}
	for k, t := range l.Turns {
		if t.User == "" {
			return script{}, fmt.Errorf(`turns[%d]: "user" is missing or empty`, k)
		}
		st := scriptTurn{user: t.User, maxTokens: -1, think: -1}
		if t.MaxTokens != nil {
			if *t.MaxTokens < 0 {
				return script{}, fmt.Errorf(`turns[%d]: "max_tokens" is negative`, k)
			}
			st.maxTokens = *t.MaxTokens
		}
		if t.ThinkMS != nil {
			switch {
			case *t.ThinkMS < 0:
				return script{}, fmt.Errorf(`turns[%d]: "think_ms" is negative`, k)
			case k == 0 && *t.ThinkMS != 0:
				return script{}, errors.New(`turns[0]: "think_ms" is not allowed on the first turn`)
			case *t.ThinkMS > int64(24*time.Hour/time.Millisecond):
				return script{}, fmt.Errorf(`turns[%d]: "think_ms" is longer than a day`, k)
			}
			st.think = time.Duration(*t.ThinkMS) * time.Millisecond
		}
		c.turns[k] = st
	}
	return c, nil
}

// describeJSONError turns encoding/json errors into messages that say where
// on the line the problem is.
func describeJSONError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("column %d: %w", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Errorf("column %d: field %q: want %s, got JSON %s", te.Offset, te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON object")
	default:
		return err
	}
}

// Name returns "jsonl".
func (s *JSONL) Name() string { return "jsonl" }

// Len returns the number of conversations in the file.
func (s *JSONL) Len() int { return len(s.convs) }

// Conversation returns conversation i mod Len.
func (s *JSONL) Conversation(i int) Conversation {
	return &jsonlConv{src: s, index: i, c: &s.convs[wrap(i, len(s.convs))]}
}

type jsonlConv struct {
	src   *JSONL
	index int
	c     *script
}

func (c *jsonlConv) Index() int     { return c.index }
func (c *jsonlConv) System() string { return c.c.system }
func (c *jsonlConv) Turns() int     { return len(c.c.turns) }

// ID returns the conversation's id from the file ("" when it had none).
func (c *jsonlConv) ID() string { return c.c.id }

func (c *jsonlConv) Next(ctx context.Context, k int, _ []openai.Message) (Turn, error) {
	if err := ctx.Err(); err != nil {
		return Turn{}, err
	}
	if k < 0 || k >= len(c.c.turns) {
		return Turn{}, fmt.Errorf("%w: turn %d of %d", ErrTurnRange, k, len(c.c.turns))
	}
	t := c.c.turns[k]
	think := t.think
	if think < 0 {
		think = c.src.think.At(c.src.seed, c.index, k)
	}
	mt := t.maxTokens
	if mt < 0 {
		mt = c.src.maxTokens
	}
	return Turn{User: t.user, MaxTokens: mt, ThinkTime: think}, nil
}

// ErrTurnRange is returned by Next for a turn index outside [0, Turns()).
var ErrTurnRange = errors.New("turn index out of range")

// wrap maps any i to [0, n), also for negative i.
func wrap(i, n int) int {
	i %= n
	if i < 0 {
		i += n
	}
	return i
}
