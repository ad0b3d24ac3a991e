package load

import (
	"errors"
	"fmt"
	"math"
)

// Arrival processes of the open loop.
const (
	// ArrivalPoisson spaces arrivals by exponential gaps (burstiness 1).
	ArrivalPoisson = "poisson"
	// ArrivalGamma spaces arrivals by gamma-distributed gaps with shape
	// Burstiness and the same mean as Poisson: below 1 is burstier, above 1
	// is more regular (vLLM's --burstiness).
	ArrivalGamma = "gamma"
)

// Config is what the engine is asked to do, read from flags or from a
// coordinator. The zero value is not valid; call Validate.
type Config struct {
	// Concurrency is the number of sessions of the closed loop, each with
	// one turn in flight or thinking. It may be 0 when SetConcurrency will
	// raise it later. It must be 0 in the open loop (use MaxConcurrency).
	Concurrency int
	// RequestRate is the open loop's mean arrival rate per second; 0 selects
	// the closed loop.
	RequestRate float64
	// Arrival is ArrivalPoisson (the default when empty) or ArrivalGamma.
	Arrival string
	// Burstiness is the gamma shape; 0 means 1. Poisson requires 0 or 1.
	Burstiness float64
	// MaxConcurrency caps the open loop's concurrent conversations; 0 means
	// no cap. Arrivals that find no free slot wait and are sent late, with
	// their lag recorded.
	MaxConcurrency int
	// TotalRequests is a budget of turns to send (vLLM's --num-prompts); the
	// run ends when it is spent. 0 means unlimited.
	TotalRequests int
	// MaxTokens caps each turn's output when the turn does not say; 0 leaves
	// it to the server.
	MaxTokens int
	// SessionHeader names a request header (for example "X-Session-ID")
	// that carries SessionID(Seed, conversation); empty sends none.
	SessionHeader string
	// Seed drives the arrival process and session ids.
	Seed int64
}

// OpenLoop reports whether the config asks for arrivals at a rate.
func (c Config) OpenLoop() bool { return c.RequestRate > 0 }

// shape is the gamma shape of the open loop's inter-arrival gaps.
func (c Config) shape() float64 {
	if c.Burstiness == 0 {
		return 1
	}
	return c.Burstiness
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if math.IsNaN(c.RequestRate) || math.IsInf(c.RequestRate, 0) || c.RequestRate < 0 {
		bad("request rate %v: must be a finite number >= 0", c.RequestRate)
	}
	if c.Concurrency < 0 {
		bad("concurrency %d: must be >= 0", c.Concurrency)
	}
	if c.MaxConcurrency < 0 {
		bad("max concurrency %d: must be >= 0", c.MaxConcurrency)
	}
	if c.TotalRequests < 0 {
		bad("total requests %d: must be >= 0", c.TotalRequests)
	}
	if c.MaxTokens < 0 {
		bad("max tokens %d: must be >= 0", c.MaxTokens)
	}
	if math.IsNaN(c.Burstiness) || math.IsInf(c.Burstiness, 0) || c.Burstiness < 0 {
		bad("burstiness %v: must be a finite number > 0", c.Burstiness)
	}
	switch c.Arrival {
	case "", ArrivalPoisson:
		if c.Burstiness != 0 && c.Burstiness != 1 {
			bad("burstiness %v: poisson arrivals have burstiness 1; use arrival %q", c.Burstiness, ArrivalGamma)
		}
	case ArrivalGamma:
	default:
		bad("arrival %q: must be %q or %q", c.Arrival, ArrivalPoisson, ArrivalGamma)
	}
	if c.OpenLoop() {
		if c.Concurrency != 0 {
			bad("concurrency %d: the open loop (request rate > 0) is capped by max concurrency instead", c.Concurrency)
		}
	} else {
		if c.MaxConcurrency != 0 {
			bad("max concurrency %d: applies to the open loop only (request rate > 0)", c.MaxConcurrency)
		}
		if c.Arrival != "" || c.Burstiness != 0 {
			bad("arrival %q, burstiness %v: apply to the open loop only (request rate > 0)", c.Arrival, c.Burstiness)
		}
	}
	return errors.Join(errs...)
}
