package workload

import (
	"context"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Source hands out conversations by index. Implementations are safe for
// concurrent use by many goroutines.
type Source interface {
	// Name is the workload's kind, for reports ("docchat", "sharegpt", "jsonl").
	Name() string
	// Conversation returns conversation i. Sources with a finite set of
	// conversations wrap i modulo their size, so any i >= 0 is valid.
	Conversation(i int) Conversation
}

// Conversation is one multi-turn chat. It is used by one goroutine at a time.
type Conversation interface {
	// Index is the conversation index the source was asked for.
	Index() int
	// System is the system prompt, or "" for none.
	System() string
	// Turns is how many user turns this conversation has (at least 1).
	Turns() int
	// Next returns user turn k (0-based) given the history so far (system
	// prompt, then alternating user and assistant messages of earlier
	// turns). It may call a user model; on failure it falls back to a
	// template and says so in Turn.Fallback rather than failing. It returns
	// an error only when ctx is done.
	Next(ctx context.Context, k int, history []openai.Message) (Turn, error)
}

// Turn is one user turn to send.
type Turn struct {
	// User is the user message content.
	User string
	// MaxTokens caps this turn's output; 0 means the run's default.
	MaxTokens int
	// ThinkTime is the pause before sending this turn (0 for the first).
	ThinkTime time.Duration
	// Fallback is set when a user model failed and a template was used.
	Fallback bool
}
