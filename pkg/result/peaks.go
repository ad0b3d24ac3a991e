package result

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// MaxPeakSeconds bounds the seconds a Peaks tracks (one week); later
// activity is ignored.
const MaxPeakSeconds = 7 * 24 * 3600

// ErrOriginMismatch is returned when Peaks of different origins are merged.
var ErrOriginMismatch = errors.New("peaks origin mismatch")

// Peaks computes vLLM's "Peak output token throughput" and "Peak concurrent
// requests" from successful samples, as vLLM's calculate_metrics does: each
// content chunk (the first at Start+TTFT, the next ones ITL apart) counts
// in the one-second bucket it falls in, and a request counts as concurrent
// in every bucket from its start's to its end's, both included. vLLM's
// buckets start at the earliest successful start; ours start at a fixed
// origin (the measurement window's start) so that agents' Peaks merge.
// Peaks is safe for concurrent use.
type Peaks struct {
	mu         sync.Mutex
	origin     time.Time
	tokens     []int64
	concurrent []int64
}

// NewPeaks returns a Peaks whose first bucket starts at origin.
func NewPeaks(origin time.Time) *Peaks { return &Peaks{origin: origin} }

// Add counts one sample; failed samples and samples starting before the
// origin are ignored, as vLLM ignores failed outputs.
func (p *Peaks) Add(s *record.Sample) {
	if s == nil || s.Result == nil || !s.Result.OK() {
		return
	}
	r := s.Result
	start := r.Start.Sub(p.origin)
	if start < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := start + r.TTFT
	p.addToken(t)
	for _, gap := range r.ITL {
		t += gap
		p.addToken(t)
	}
	first, last := bucket(start), bucket(start+r.E2E)
	for sec := first; sec <= last && sec < MaxPeakSeconds; sec++ {
		p.concurrent = grow(p.concurrent, sec)
		p.concurrent[sec]++
	}
}

func (p *Peaks) addToken(t time.Duration) {
	sec := bucket(t)
	if sec >= MaxPeakSeconds {
		return
	}
	p.tokens = grow(p.tokens, sec)
	p.tokens[sec]++
}

// Merge adds o's buckets into p. Both must share one origin.
func (p *Peaks) Merge(o *Peaks) error {
	if o == nil || o == p {
		return nil
	}
	o.mu.Lock()
	tokens := append([]int64(nil), o.tokens...)
	conc := append([]int64(nil), o.concurrent...)
	origin := o.origin
	o.mu.Unlock()
	if !origin.Equal(p.origin) {
		return fmt.Errorf("merge peaks: %w", ErrOriginMismatch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, n := range tokens {
		p.tokens = grow(p.tokens, i)
		p.tokens[i] += n
	}
	for i, n := range conc {
		p.concurrent = grow(p.concurrent, i)
		p.concurrent[i] += n
	}
	return nil
}

// Max returns the highest output tokens in one second and the highest
// number of requests active in one second (vLLM's max_output_tokens_per_s
// and max_concurrent_requests).
func (p *Peaks) Max() (tokensPerSec float64, concurrent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var mt, mc int64
	for _, n := range p.tokens {
		mt = max(mt, n)
	}
	for _, n := range p.concurrent {
		mc = max(mc, n)
	}
	return float64(mt), int(mc)
}

func bucket(d time.Duration) int { return int(d / time.Second) }

func grow(s []int64, i int) []int64 {
	if i < len(s) {
		return s
	}
	return append(s, make([]int64, i+1-len(s))...)
}
