package load

import (
	"math"
	"math/rand/v2"
	"time"
)

// schedule yields the open loop's arrival times as offsets from the start of
// the run. Offsets accumulate from the start, never from when a request was
// actually sent, so a slow server cannot slow the schedule down (STYLE 13).
// A schedule is used by one goroutine.
type schedule struct {
	rng   *rand.Rand
	rate  float64 // arrivals per second
	shape float64 // gamma shape; 1 is Poisson
	at    float64 // seconds since start of the last arrival
}

func newSchedule(rate, shape float64, seed int64) *schedule {
	// The second PCG word is fixed so a seed alone names the schedule.
	return &schedule{
		rng:   rand.New(rand.NewPCG(uint64(seed), 0x666c656574)),
		rate:  rate,
		shape: shape,
	}
}

// next returns the offset of the next arrival from the start.
func (s *schedule) next() time.Duration {
	var gap float64
	if s.shape == 1 {
		gap = s.rng.ExpFloat64() / s.rate
	} else {
		// Gamma(shape k, scale 1/(rate*k)) has mean 1/rate.
		gap = gammaVariate(s.rng, s.shape) / (s.rate * s.shape)
	}
	s.at += gap
	return time.Duration(s.at * float64(time.Second))
}

// gammaVariate draws from Gamma(shape, 1) with Marsaglia and Tsang's method
// (ACM TOMS 26(3), 2000); shapes below 1 use the boost Gamma(k+1)*U^(1/k).
func gammaVariate(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return gammaVariate(r, shape+1) * math.Pow(r.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
