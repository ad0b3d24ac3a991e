package ready

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// Defaults applied by Config.WithDefaults to zero fields. The timeouts are
// generous: after a worker restart a 70B model can take minutes to load, and
// a sweep would rather wait than measure a half-started stack.
const (
	DefaultHealthTimeout      = 10 * time.Minute
	DefaultModelsTimeout      = 15 * time.Minute
	DefaultCompletionsTimeout = 10 * time.Minute
	DefaultPrimeTimeout       = 5 * time.Minute
	// DefaultCompletions is K, the completions in a row that must succeed
	// with stable TTFT.
	DefaultCompletions = 5
	// DefaultMaxTokens is the length of each check completion.
	DefaultMaxTokens = 4
	// DefaultTTFTSpread bounds max/min of the last K TTFTs.
	DefaultTTFTSpread = 3.0
	// DefaultTTFTSlack is the max-min below which TTFTs count as stable
	// whatever their ratio: at a few milliseconds the ratio is noise.
	DefaultTTFTSlack = 50 * time.Millisecond
	// DefaultPrime is the number of priming conversations; DefaultPrimeTurns
	// their turns each.
	DefaultPrime      = 4
	DefaultPrimeTurns = 3
	// DefaultInterval is the first retry delay; it doubles up to
	// DefaultMaxInterval.
	DefaultInterval    = 250 * time.Millisecond
	DefaultMaxInterval = 5 * time.Second
	// DefaultRequestTimeout bounds one check request.
	DefaultRequestTimeout = time.Minute
	// MaxCheckTokens is the longest check completion allowed.
	MaxCheckTokens = 8
)

// Config configures a Gate. It is a plain value; WithDefaults fills zero
// fields and Validate checks the result. Safe to copy and share read-only.
type Config struct {
	// Client is the target: base URL, model, endpoint, API key variable and
	// headers. MinTokens is ignored (a check completion is short); request
	// timeouts default to RequestTimeout.
	Client client.Config

	// HealthTimeout, ModelsTimeout, CompletionsTimeout and PrimeTimeout
	// bound each stage, measured from the stage's start.
	HealthTimeout      time.Duration
	ModelsTimeout      time.Duration
	CompletionsTimeout time.Duration
	PrimeTimeout       time.Duration

	// Completions is K: this many streamed completions in a row must
	// succeed, and their TTFTs must be stable (see TTFTSpread).
	Completions int
	// MaxTokens is each check completion's max_tokens, 1..MaxCheckTokens.
	MaxTokens int
	// TTFTSpread and TTFTSlack define stable: the last K TTFTs satisfy
	// max <= TTFTSpread*min, or max-min <= TTFTSlack. A ratio rather than a
	// coefficient of variation because with K around 5 a CV is itself too
	// noisy, and a ratio says plainly "no request took 3x another"; the
	// slack keeps millisecond TTFTs on a fast target from failing on noise.
	TTFTSpread float64
	TTFTSlack  time.Duration

	// Prime is the number of priming conversations run at once after the
	// completions stage, each PrimeTurns short turns; a negative Prime
	// turns priming off.
	Prime      int
	PrimeTurns int

	// Interval is the first retry delay after a failed check; it doubles
	// up to MaxInterval, with jitter.
	Interval    time.Duration
	MaxInterval time.Duration
	// RequestTimeout bounds one check request.
	RequestTimeout time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HealthTimeout, DefaultHealthTimeout)
	def(&c.ModelsTimeout, DefaultModelsTimeout)
	def(&c.CompletionsTimeout, DefaultCompletionsTimeout)
	def(&c.PrimeTimeout, DefaultPrimeTimeout)
	def(&c.TTFTSlack, DefaultTTFTSlack)
	def(&c.Interval, DefaultInterval)
	def(&c.MaxInterval, max(DefaultMaxInterval, c.Interval))
	def(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Completions == 0 {
		c.Completions = DefaultCompletions
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.TTFTSpread == 0 {
		c.TTFTSpread = DefaultTTFTSpread
	}
	if c.Prime == 0 {
		c.Prime = DefaultPrime
	}
	if c.PrimeTurns == 0 {
		c.PrimeTurns = DefaultPrimeTurns
	}
	return c
}

// Validate reports every problem with c, joined. Call it on WithDefaults'
// result.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{
		{"health timeout", c.HealthTimeout}, {"models timeout", c.ModelsTimeout},
		{"completions timeout", c.CompletionsTimeout}, {"prime timeout", c.PrimeTimeout},
		{"interval", c.Interval}, {"max interval", c.MaxInterval}, {"request timeout", c.RequestTimeout},
	} {
		if t.d <= 0 {
			add("%s %s must be positive", t.name, t.d)
		}
	}
	if c.MaxInterval < c.Interval {
		add("max interval %s is below interval %s", c.MaxInterval, c.Interval)
	}
	if c.Completions < 1 {
		add("completions %d must be at least 1", c.Completions)
	}
	if c.MaxTokens < 1 || c.MaxTokens > MaxCheckTokens {
		add("max tokens %d must be 1..%d", c.MaxTokens, MaxCheckTokens)
	}
	if c.TTFTSpread < 1 {
		add("ttft spread %g must be at least 1", c.TTFTSpread)
	}
	if c.TTFTSlack < 0 {
		add("ttft slack %s must not be negative", c.TTFTSlack)
	}
	if c.PrimeTurns < 1 {
		add("prime turns %d must be at least 1", c.PrimeTurns)
	}
	return errors.Join(errs...)
}
