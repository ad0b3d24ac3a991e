package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// ThinkKind is the shape of a think-time distribution.
type ThinkKind int

// Think-time distributions.
const (
	// ThinkNone sends the next turn as soon as the previous reply ends.
	ThinkNone ThinkKind = iota
	// ThinkFixed waits exactly Mean before every turn after the first.
	ThinkFixed
	// ThinkExp waits an exponentially distributed time with mean Mean, the
	// memoryless pause of a user who reads at a steady hazard rate.
	ThinkExp
)

// ThinkTime is the pause a simulated user takes between reading a reply and
// sending the next turn. The zero value is ThinkNone. A ThinkTime is a plain
// value and safe to copy and share.
//
// It implements flag.Value and encoding.TextUnmarshaler, so commands can bind
// it to a flag directly.
type ThinkTime struct {
	Kind ThinkKind
	Mean time.Duration
}

// ErrThinkTime is wrapped by every error ParseThinkTime returns.
var ErrThinkTime = errors.New("invalid think time")

// ParseThinkTime parses "none" (or ""), a Go duration such as "2s" for a fixed
// pause, or "exp:2s" for an exponential pause with that mean. "0s" is the
// same as "none".
func ParseThinkTime(s string) (ThinkTime, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return ThinkTime{}, nil
	}
	kind := ThinkFixed
	if rest, ok := strings.CutPrefix(s, "exp:"); ok {
		kind, s = ThinkExp, rest
	} else if rest, ok := strings.CutPrefix(s, "fixed:"); ok {
		s = rest
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return ThinkTime{}, fmt.Errorf("%w %q: want none, a duration like 2s, or exp:2s", ErrThinkTime, s)
	}
	if d < 0 {
		return ThinkTime{}, fmt.Errorf("%w %q: negative", ErrThinkTime, s)
	}
	if d == 0 {
		return ThinkTime{}, nil
	}
	return ThinkTime{Kind: kind, Mean: d}, nil
}

// String returns the form ParseThinkTime accepts.
func (t ThinkTime) String() string {
	switch {
	case t.Kind == ThinkNone || t.Mean <= 0:
		return "none"
	case t.Kind == ThinkExp:
		return "exp:" + t.Mean.String()
	default:
		return t.Mean.String()
	}
}

// Set parses s into t; it makes *ThinkTime a flag.Value.
func (t *ThinkTime) Set(s string) error {
	v, err := ParseThinkTime(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Type names the value in command help (pflag.Value).
func (t *ThinkTime) Type() string { return "none|DURATION|exp:MEAN" }

// UnmarshalText parses text like ParseThinkTime.
func (t *ThinkTime) UnmarshalText(text []byte) error { return t.Set(string(text)) }

// MarshalText returns String.
func (t ThinkTime) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Validate reports a negative mean or an unknown kind.
func (t ThinkTime) Validate() error {
	if t.Mean < 0 {
		return fmt.Errorf("%w: negative mean %s", ErrThinkTime, t.Mean)
	}
	if t.Kind < ThinkNone || t.Kind > ThinkExp {
		return fmt.Errorf("%w: unknown kind %d", ErrThinkTime, t.Kind)
	}
	return nil
}

// At returns the think time before turn k of conversation conv in a run with
// the given seed. It is a pure function of its arguments, and turn 0 (the
// first) never waits.
func (t ThinkTime) At(seed int64, conv, k int) time.Duration {
	if k <= 0 {
		return 0
	}
	switch {
	case t.Kind == ThinkNone || t.Mean <= 0:
		return 0
	case t.Kind == ThinkExp:
		r := turnRand(seed, conv, k, streamThink)
		return time.Duration(r.ExpFloat64() * float64(t.Mean))
	default:
		return t.Mean
	}
}

// Random streams: each (seed, conversation, turn) derives independent
// generators per purpose, so adding a draw for one purpose never shifts the
// values another purpose sees.
const (
	streamConversation uint64 = iota + 1
	streamThink
	streamQuestion
	streamDocument
	streamShuffle
	streamAnswer
)

// splitmix64 is the finaliser of SplitMix64: a bijective mix whose outputs
// for consecutive inputs look independent.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seedRand returns a PCG generator seeded from a hash of the seed and keys.
// Never shared: each caller gets its own, so results do not depend on which
// goroutine asks first.
func seedRand(seed int64, keys ...uint64) *rand.Rand {
	h := splitmix64(uint64(seed))
	for _, k := range keys {
		h = splitmix64(h ^ k)
	}
	return rand.New(rand.NewPCG(h, splitmix64(h^0x5851f42d4c957f2d)))
}

// convRand is the generator for conversation-level choices of conversation
// conv (its document, turn count, question order).
func convRand(seed int64, conv int) *rand.Rand {
	return seedRand(seed, streamConversation, uint64(conv))
}

// turnRand is the generator for one purpose at turn k of conversation conv.
func turnRand(seed int64, conv, k int, stream uint64) *rand.Rand {
	return seedRand(seed, stream, uint64(conv), uint64(k))
}
