package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Mode is a routing mode of the simulated frontend.
type Mode string

// Routing modes. ModeKV scores workers like Dynamo's KV router; ModePrefixHash
// is kubeai's PrefixHash (consistent hashing with bounded loads);
// the rest ignore caches.
const (
	ModeKV          Mode = "kv"
	ModePrefixHash  Mode = "prefix-hash"
	ModeRoundRobin  Mode = "round_robin"
	ModeRandom      Mode = "random"
	ModeLeastLoaded Mode = "least-loaded"
)

// Modes lists every routing mode, in the order help texts show them.
func Modes() []Mode {
	return []Mode{ModeKV, ModePrefixHash, ModeRoundRobin, ModeRandom, ModeLeastLoaded}
}

// ErrUnknownMode is returned by ParseMode for a name that is not a mode.
var ErrUnknownMode = errors.New("unknown routing mode")

// ParseMode parses a routing mode name. It accepts the spellings used by
// Dynamo ("round-robin") and kubeai ("PrefixHash", "LeastLoad") as aliases.
func ParseMode(s string) (Mode, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.NewReplacer("-", "", "_", "").Replace(k)
	switch k {
	case "kv":
		return ModeKV, nil
	case "prefixhash":
		return ModePrefixHash, nil
	case "roundrobin", "rr":
		return ModeRoundRobin, nil
	case "random":
		return ModeRandom, nil
	case "leastloaded", "leastload":
		return ModeLeastLoaded, nil
	}
	return "", fmt.Errorf("%w %q (want one of kv, prefix-hash, round_robin, random, least-loaded)", ErrUnknownMode, s)
}

// EngineConfig describes one replica: its KV cache, its scheduler limits and
// the cost model of one engine step. All durations are simulated time; the
// simulator divides them by Config.TimeScale.
type EngineConfig struct {
	// BlockSize is the number of tokens per KV block (vLLM uses 16,
	// TensorRT-LLM commonly 32).
	BlockSize int
	// NumBlocks is the number of KV blocks of one replica.
	NumBlocks int
	// MaxBatch is the most sequences running at once (vLLM max_num_seqs).
	MaxBatch int
	// MaxNumTokens is the token budget of one step (vLLM
	// max_num_batched_tokens); longer prompts are prefilled in chunks.
	MaxNumTokens int
	// MaxModelLen is the longest prompt plus completion a request may have.
	MaxModelLen int
	// StepBase is the fixed cost of one forward pass of the target model
	// (reading its weights once, plus launch and tensor-parallel overhead).
	StepBase time.Duration
	// PrefillPerToken is the cost of each uncached prompt token in a step
	// (its share of the matrix multiplications and attention).
	PrefillPerToken time.Duration
	// DecodePerSeq is the cost of each token a decoding sequence feeds the
	// target model in a step: one without speculative decoding, 1 +
	// DraftTokens with it (the last token and the drafts to verify).
	DecodePerSeq time.Duration
	// AttentionPer1K is the cost of attending over 1,000 context tokens of
	// a decoding sequence (reading its KV cache).
	AttentionPer1K time.Duration

	// DraftTokens is how many tokens a draft model proposes per step for
	// speculative decoding (TensorRT-LLM max_draft_len); 0 turns it off.
	DraftTokens int
	// Acceptance is the probability that the target accepts each draft
	// token given it accepted the previous ones; a step yields 1 + the
	// accepted run, on average (1 - a^(k+1)) / (1 - a) tokens.
	Acceptance float64
	// DraftStep is the fixed cost of one forward pass of the draft model;
	// a step runs DraftTokens of them before verifying.
	DraftStep time.Duration
	// DraftPerSeq is the cost of each decoding sequence in one draft pass.
	DraftPerSeq time.Duration
	// DraftAttentionPer1K is the cost of one draft pass attending over
	// 1,000 context tokens of a decoding sequence: the draft model keeps
	// its own KV cache of the whole context and reads it on every pass.
	DraftAttentionPer1K time.Duration
}

// TokensPerStep is the mean number of tokens a decoding sequence gains per
// step: 1 without speculative decoding, (1 - a^(k+1)) / (1 - a) with k
// draft tokens accepted with probability a each.
func (c EngineConfig) TokensPerStep() float64 {
	if c.DraftTokens == 0 {
		return 1
	}
	if c.Acceptance >= 1 {
		return float64(c.DraftTokens + 1)
	}
	return (1 - math.Pow(c.Acceptance, float64(c.DraftTokens+1))) / (1 - c.Acceptance)
}

// DecodeStep is the simulated duration of one step of batch decoding
// sequences with ctx context tokens each and nothing to prefill.
func (c EngineConfig) DecodeStep(batch, ctx int) time.Duration {
	return c.stepCost(0, batch, batch*ctx)
}

// PrefillStep is the simulated duration of a step that prefills n prompt
// tokens alongside batch decoding sequences of ctx context tokens each.
func (c EngineConfig) PrefillStep(n, batch, ctx int) time.Duration {
	return c.stepCost(n, batch, batch*ctx)
}

// stepCost is the cost model of one step: the target's pass over prefill
// and verify tokens plus, when any sequence decodes with a draft model,
// DraftTokens draft passes.
func (c EngineConfig) stepCost(prefill, decode, ctxTokens int) time.Duration {
	d := c.StepBase + time.Duration(prefill)*c.PrefillPerToken +
		time.Duration(decode*(1+c.DraftTokens))*c.DecodePerSeq +
		time.Duration(int64(ctxTokens)*int64(c.AttentionPer1K)/1000)
	if decode > 0 && c.DraftTokens > 0 {
		d += time.Duration(c.DraftTokens) * (c.DraftStep + time.Duration(decode)*c.DraftPerSeq +
			time.Duration(int64(ctxTokens)*int64(c.DraftAttentionPer1K)/1000))
	}
	return d
}

// Validate reports the first problem with c.
func (c EngineConfig) Validate() error {
	switch {
	case c.BlockSize != 16 && c.BlockSize != 32:
		return fmt.Errorf("block size %d: want 16 or 32", c.BlockSize)
	case c.NumBlocks < 2:
		return fmt.Errorf("kv blocks %d: want at least 2", c.NumBlocks)
	case c.MaxBatch < 1:
		return fmt.Errorf("max batch %d: want at least 1", c.MaxBatch)
	case c.MaxNumTokens < 1:
		return fmt.Errorf("max num tokens %d: want at least 1", c.MaxNumTokens)
	case c.MaxModelLen < 16:
		return fmt.Errorf("max model len %d: want at least 16", c.MaxModelLen)
	case c.StepBase <= 0:
		return fmt.Errorf("step base %v: want > 0", c.StepBase)
	case c.PrefillPerToken < 0, c.DecodePerSeq < 0, c.AttentionPer1K < 0, c.DraftStep < 0, c.DraftPerSeq < 0, c.DraftAttentionPer1K < 0:
		return errors.New("step costs must not be negative")
	case c.DraftTokens < 0 || c.DraftTokens > 16:
		return fmt.Errorf("draft tokens %d: want 0..16", c.DraftTokens)
	case c.Acceptance < 0 || c.Acceptance > 1:
		return fmt.Errorf("acceptance %v: want 0..1", c.Acceptance)
	case c.DraftTokens+1 > c.MaxNumTokens:
		return fmt.Errorf("draft tokens %d: a decoding sequence needs %d of the %d-token budget", c.DraftTokens, c.DraftTokens+1, c.MaxNumTokens)
	}
	return nil
}

// OutputConfig decides completion lengths. With UntilMaxTokens, a request
// that sets max_tokens gets exactly that many tokens, as a model run with
// ignore_eos does: the workload sets each turn's length (fleetbench's
// document chats draw it from the published answer lengths). Otherwise, and
// for requests without max_tokens, the model stops naturally: lengths are
// log-normal around Mean with shape Sigma, clamped to [Min, Max] and capped
// at max_tokens, and a pure function of (prompt, seed).
type OutputConfig struct {
	Mean  int
	Sigma float64
	Min   int
	Max   int
	// UntilMaxTokens generates up to max_tokens whenever a request sets
	// it; false is the natural-stop model.
	UntilMaxTokens bool
}

// Validate reports the first problem with c.
func (c OutputConfig) Validate() error {
	if c.Min < 1 || c.Max < c.Min || c.Mean < c.Min || c.Mean > c.Max || c.Sigma < 0 {
		return fmt.Errorf("output length: want 1 <= min (%d) <= mean (%d) <= max (%d) and sigma >= 0", c.Min, c.Mean, c.Max)
	}
	return nil
}

// FrontendConfig is the time a request spends outside the engines before
// its first token: a fixed part (HTTP, chat template, routing, the request
// plane to the worker and the first chunk's way back) and a part per prompt
// token that prefix caching does not remove (tokenising, hashing blocks for
// the router, matching them in the worker's cache, moving token ids).
type FrontendConfig struct {
	Overhead         time.Duration
	OverheadPerToken time.Duration
}

// Delay is the frontend's time for a prompt of n tokens.
func (c FrontendConfig) Delay(n int) time.Duration {
	return c.Overhead + time.Duration(n)*c.OverheadPerToken
}

// Defaults of the router and of the server lifecycle.
const (
	DefaultModel             = "meta-llama/Llama-3.1-70B-Instruct-FP8"
	DefaultProfile           = "llama-3.1-70b-fp8-h100-tp2"
	DefaultOverlapWeight     = 1.0
	DefaultEventDelay        = 20 * time.Millisecond
	DefaultPrefixChars       = 100
	DefaultLoadFactor        = 1.25
	DefaultReplication       = 256
	DefaultStartupTime       = 60 * time.Second
	DefaultModelsListedAfter = 20 * time.Second
	DefaultShutdownTimeout   = 5 * time.Second
)

// Config configures a Sim. Build one with ProfileConfig and adjust fields;
// New validates it.
type Config struct {
	// Model is the served model name; requests naming another get 404.
	Model string
	// Profile names the hardware profile the engine figures came from
	// (informational once the Engine fields are set).
	Profile string
	// Replicas is the number of workers, at most 64.
	Replicas int
	// Router is the initial routing mode.
	Router Mode
	// TimeScale divides every simulated duration: 10 runs ten times faster.
	TimeScale float64
	// Listen is the address Start listens on ("127.0.0.1:0" for any port).
	Listen string
	// Engine describes each replica.
	Engine EngineConfig
	// Output decides completion lengths.
	Output OutputConfig
	// Frontend is the per-request cost outside the engines.
	Frontend FrontendConfig

	// OverlapWeight weighs blocks still to prefill against active decode
	// blocks in the kv router's cost (Dynamo --kv-overlap-score-weight).
	OverlapWeight float64
	// RouterTemperature > 0 samples workers by softmax over negated costs
	// instead of taking the cheapest (Dynamo --router-temperature).
	RouterTemperature float64
	// EventDelay is how long stored/removed block events take from a
	// worker to the kv router's indexer (simulated time).
	EventDelay time.Duration
	// PrefixChars is how many characters of the prompt prefix-hash hashes.
	PrefixChars int
	// LoadFactor bounds prefix-hash loads at LoadFactor x mean in-flight.
	LoadFactor float64
	// Replication is the number of virtual nodes per worker on the ring.
	Replication int

	// StartupTime is how long workers take to load after a restart (and at
	// start when ColdStart is set); /health/ready fails meanwhile.
	StartupTime time.Duration
	// ModelsListedAfter is when, into the startup, /v1/models starts to
	// list the model while completions still fail with 503; before it
	// /v1/models lists nothing and completions get 404. Set it equal to
	// StartupTime to remove that phase.
	ModelsListedAfter time.Duration
	// ColdStart makes the simulator begin in the startup phases.
	ColdStart bool
	// ShutdownTimeout bounds the graceful drain of in-flight requests.
	ShutdownTimeout time.Duration
	// Seed seeds the router's random choices.
	Seed int64
}

// ProfileConfig returns a complete Config for the named profile with the
// router and lifecycle defaults.
func ProfileConfig(name string) (Config, error) {
	p, ok := LookupProfile(name)
	if !ok {
		return Config{}, fmt.Errorf("%w %q", ErrUnknownProfile, name)
	}
	return Config{
		Model:             p.Model,
		Profile:           p.Name,
		Replicas:          p.Replicas,
		Router:            ModeKV,
		TimeScale:         1,
		Listen:            "127.0.0.1:8000",
		Engine:            p.Engine,
		Output:            p.Output,
		Frontend:          p.Frontend,
		OverlapWeight:     DefaultOverlapWeight,
		EventDelay:        DefaultEventDelay,
		PrefixChars:       DefaultPrefixChars,
		LoadFactor:        DefaultLoadFactor,
		Replication:       DefaultReplication,
		StartupTime:       DefaultStartupTime,
		ModelsListedAfter: DefaultModelsListedAfter,
		ShutdownTimeout:   DefaultShutdownTimeout,
		Seed:              1,
	}, nil
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if c.Model == "" {
		return errors.New("model name is empty")
	}
	if c.Replicas < 1 || c.Replicas > 64 {
		return fmt.Errorf("replicas %d: want 1..64", c.Replicas)
	}
	if _, err := ParseMode(string(c.Router)); err != nil {
		return err
	}
	if c.TimeScale <= 0 {
		return fmt.Errorf("time scale %v: want > 0", c.TimeScale)
	}
	if err := c.Engine.Validate(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := c.Output.Validate(); err != nil {
		return err
	}
	if c.Frontend.Overhead < 0 || c.Frontend.OverheadPerToken < 0 {
		return errors.New("frontend overhead must not be negative")
	}
	switch {
	case c.OverlapWeight < 0:
		return fmt.Errorf("overlap weight %v: want >= 0", c.OverlapWeight)
	case c.RouterTemperature < 0:
		return fmt.Errorf("router temperature %v: want >= 0", c.RouterTemperature)
	case c.EventDelay < 0:
		return fmt.Errorf("event delay %v: want >= 0", c.EventDelay)
	case c.PrefixChars < 1:
		return fmt.Errorf("prefix chars %d: want >= 1", c.PrefixChars)
	case c.LoadFactor < 1:
		return fmt.Errorf("load factor %v: want >= 1", c.LoadFactor)
	case c.Replication < 1:
		return fmt.Errorf("replication %d: want >= 1", c.Replication)
	case c.StartupTime < 0 || c.ModelsListedAfter < 0 || c.ModelsListedAfter > c.StartupTime:
		return fmt.Errorf("startup %v, models listed after %v: want 0 <= listed <= startup", c.StartupTime, c.ModelsListedAfter)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("shutdown timeout %v: want >= 0", c.ShutdownTimeout)
	}
	return nil
}

// scaled converts a simulated duration to wall time.
func (c Config) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.TimeScale)
}
