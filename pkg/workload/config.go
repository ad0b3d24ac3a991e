package workload

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// Source kinds accepted by Config.Kind.
const (
	KindDocChat  = "docchat"
	KindShareGPT = "sharegpt"
	KindJSONL    = "jsonl"
)

// Defaults shared by every command, the sweep file and the agents' wire
// spec: Default returns a Config holding them, and nothing else sets a
// workload default.
const (
	// DefaultKind is the document-chat workload of the field studies.
	DefaultKind = KindDocChat
	// DefaultMaxTokens caps every turn's output, the studies' 1,024.
	DefaultMaxTokens = 1024
	// DefaultSeed is the seed of conversations, arrivals and session ids
	// (vLLM's benchmark also defaults to 0).
	DefaultSeed int64 = 0
)

// Config is the workload: which conversations are sent, and how. It is the
// one typed configuration every entry point decodes into: command flags
// (internal/flags), the sweep file's `workload:` section (YAML keys are the json
// tags) and the agents' assignment (the WorkloadSpec protobuf message), so
// the same settings give the same conversations everywhere. Fields that do
// not apply to Kind are ignored. A Config is a plain value, safe to copy.
type Config struct {
	// Kind is "docchat" (default), "sharegpt" or "jsonl".
	Kind string `json:"kind,omitempty"`
	// Dataset is the dataset file for sharegpt and jsonl, and the optional
	// directory of documents for docchat.
	Dataset string `json:"dataset,omitempty"`
	// Seed makes every conversation reproducible.
	Seed int64 `json:"seed"`
	// MaxTokens caps every turn's output; 0 leaves it to the server.
	// JSONL turns with their own max_tokens keep theirs.
	MaxTokens int `json:"max_tokens"`
	// Think is the pause before each turn after the first. JSONL turns
	// with their own think_ms keep theirs.
	Think ThinkTime `json:"think_time"`
	// Turns bounds the user turns per conversation: docchat draws the count
	// from it (zero: 3-5); for sharegpt its Max caps each conversation
	// (zero: every turn).
	Turns Turns `json:"turns,omitzero"`
	// SessionHeader names a request header carrying a per-conversation
	// session id (e.g. X-Session-ID), for routers that stick sessions.
	SessionHeader string `json:"session_header,omitempty"`

	// Docchat: see DocChatConfig.
	Documents    int              `json:"documents,omitempty"`
	PromptTokens int              `json:"prompt_tokens,omitempty"`
	UserModel    *UserModelConfig `json:"user_model,omitempty"`
	// NaturalStop sends only MaxTokens as each turn's cap and lets the
	// model stop; unset, each turn asks for an answer of the published
	// lengths (AnswerLength). The built-in simulator then uses its
	// natural-stop model too.
	NaturalStop bool `json:"natural_stop,omitempty"`

	// ShareGPT: see ShareGPTConfig.
	MaxConversations int  `json:"max_conversations,omitempty"`
	MinMessages      int  `json:"min_messages,omitempty"`
	Shuffle          bool `json:"shuffle,omitempty"`
	OutputLen        bool `json:"output_len,omitempty"`
}

// Default returns the workload every command starts from: document chats
// with the documented defaults.
func Default() Config {
	return Config{
		Kind:         DefaultKind,
		Seed:         DefaultSeed,
		MaxTokens:    DefaultMaxTokens,
		Documents:    DefaultDocuments,
		PromptTokens: DefaultPromptTokens,
	}
}

// DocChat returns the docchat part of c.
func (c Config) DocChat() DocChatConfig {
	return DocChatConfig{
		Seed: c.Seed, Documents: c.Documents, PromptTokens: c.PromptTokens, Dir: c.Dataset,
		MinTurns: c.Turns.Min, MaxTurns: c.Turns.Max, MaxTokens: c.MaxTokens, Think: c.Think,
		UserModel: c.UserModel, Answers: AnswerLength{Natural: c.NaturalStop},
	}
}

// ShareGPT returns the ShareGPT part of c.
func (c Config) ShareGPT() ShareGPTConfig {
	return ShareGPTConfig{
		Seed: c.Seed, Shuffle: c.Shuffle, MaxConversations: c.MaxConversations,
		MinMessages: c.MinMessages, MaxTurns: c.Turns.Max, MaxTokens: c.MaxTokens,
		OutputLen: c.OutputLen, Think: c.Think,
	}
}

// Validate reports settings that cannot work, without reading files.
func (c Config) Validate() error {
	if um := c.UserModel; um != nil {
		switch u, err := url.Parse(um.URL); {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("user_model: url %q must be http:// or https:// with a host", client.RedactURL(um.URL))
		case u.User != nil:
			return fmt.Errorf("user_model: url %q must not carry user info: give the key through api_key_env", client.RedactURL(um.URL))
		case um.Model == "":
			return errors.New("user_model: model is required")
		case c.Kind != "" && c.Kind != KindDocChat:
			return fmt.Errorf("user_model: only docchat asks a user model, not %s", c.Kind)
		}
	}
	if c.Turns.Min < 0 || c.Turns.Max < c.Turns.Min {
		return fmt.Errorf("turns %q: max turns below min turns; want N or MIN-MAX with 1 <= MIN <= MAX", c.Turns.String())
	}
	switch c.Kind {
	case "", KindDocChat:
		return c.DocChat().WithDefaults().Validate()
	case KindShareGPT:
		if c.Dataset == "" {
			return errors.New("workload sharegpt: dataset path is empty (set the dataset file)")
		}
		return c.ShareGPT().Validate()
	case KindJSONL:
		if c.Dataset == "" {
			return errors.New("workload jsonl: dataset path is empty (set the dataset file)")
		}
		if c.MaxTokens < 0 {
			return errors.New("workload jsonl: max tokens is negative")
		}
		return c.Think.Validate()
	default:
		return fmt.Errorf("unknown workload kind %q (want %s, %s or %s)", c.Kind, KindDocChat, KindShareGPT, KindJSONL)
	}
}

// Turns is a range of user turns per conversation, written "N" or
// "MIN-MAX". The zero value means the workload's default. It implements
// encoding.TextMarshaler/TextUnmarshaler (the sweep file) and pflag.Value
// (the command line).
type Turns struct {
	Min, Max int
}

// ParseTurns parses "N" or "MIN-MAX" with 1 <= MIN <= MAX; "" is the zero
// Turns (the workload's default).
func ParseTurns(s string) (Turns, error) {
	if s = strings.TrimSpace(s); s == "" {
		return Turns{}, nil
	}
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	b, errB := strconv.Atoi(strings.TrimSpace(hi))
	if errA != nil || errB != nil || a < 1 || b < a {
		return Turns{}, fmt.Errorf("turns %q: want N or MIN-MAX with 1 <= MIN <= MAX", s)
	}
	return Turns{Min: a, Max: b}, nil
}

// IsZero reports the default range.
func (t Turns) IsZero() bool { return t == Turns{} }

// String returns the form ParseTurns accepts ("" for the default).
func (t Turns) String() string {
	switch {
	case t.IsZero():
		return ""
	case t.Min == t.Max:
		return strconv.Itoa(t.Min)
	default:
		return fmt.Sprintf("%d-%d", t.Min, t.Max)
	}
}

// Set parses s into t.
func (t *Turns) Set(s string) error {
	v, err := ParseTurns(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Type names the value in command help.
func (t *Turns) Type() string { return "N|MIN-MAX" }

// UnmarshalText parses text like ParseTurns.
func (t *Turns) UnmarshalText(text []byte) error { return t.Set(string(text)) }

// MarshalText returns String.
func (t Turns) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalJSON takes "3-5", "4" or a bare number (YAML's `turns: 4`).
func (t *Turns) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	} else if s == "null" {
		s = ""
	}
	return t.Set(s)
}
