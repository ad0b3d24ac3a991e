package sim

import (
	"errors"
	"fmt"
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
	// StepBase is the fixed cost of one step (reading the weights once).
	StepBase time.Duration
	// PrefillPerToken is the cost of each uncached prompt token in a step.
	PrefillPerToken time.Duration
	// DecodePerSeq is the cost of each decoding sequence in a step.
	DecodePerSeq time.Duration
	// AttentionPer1K is the cost of attending over 1,000 context tokens of
	// a decoding sequence (reading its KV cache).
	AttentionPer1K time.Duration
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
	case c.PrefillPerToken < 0, c.DecodePerSeq < 0, c.AttentionPer1K < 0:
		return errors.New("step costs must not be negative")
	}
	return nil
}

// OutputConfig is the distribution of natural completion lengths (when the
// request does not force its length with ignore_eos). Lengths are log-normal
// around Mean with shape Sigma, clamped to [Min, Max], and a pure function of
// (prompt, seed).
type OutputConfig struct {
	Mean  int
	Sigma float64
	Min   int
	Max   int
}

// Validate reports the first problem with c.
func (c OutputConfig) Validate() error {
	if c.Min < 1 || c.Max < c.Min || c.Mean < c.Min || c.Mean > c.Max || c.Sigma < 0 {
		return fmt.Errorf("output length: want 1 <= min (%d) <= mean (%d) <= max (%d) and sigma >= 0", c.Min, c.Mean, c.Max)
	}
	return nil
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
	// Output is the natural completion length distribution.
	Output OutputConfig

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
		Output:            OutputConfig{Mean: 250, Sigma: 0.6, Min: 16, Max: 1024},
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
