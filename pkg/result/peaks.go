package result

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// MaxPeakSeconds bounds the seconds a Peaks tracks from its origin (one
// week); tokens later than that are ignored, and a request still in flight
// then counts as in flight until that horizon.
const MaxPeakSeconds = 7 * 24 * 3600

// ErrOriginMismatch is returned when Peaks of different origins are merged.
var ErrOriginMismatch = errors.New("peaks origin mismatch")

// Peaks computes vLLM's "Peak output token throughput" and "Peak concurrent
// requests" from successful samples (vLLM ignores failed outputs in both).
//
// Tokens are counted as vLLM's calculate_metrics does: each content chunk
// (the first at Start+TTFT, the next ones ITL apart) counts in the
// one-second bucket it falls in. vLLM's buckets start at the earliest
// successful start; ours start at a fixed origin (the measurement window's
// start) so that agents' and windows' Peaks merge.
//
// The peak concurrency is the highest number of requests in flight at one
// instant, a request being in flight over the half-open [Start, Start+E2E)
// (one that ends at the very instant another is sent does not overlap it).
// The instants looked at are the ticks origin + k·PeakResolution (every
// millisecond), where the count is exact however the sends and ends
// between ticks are ordered (see timeline); a level held for less than a
// millisecond between two ticks can be missed, never over-counted. At the
// window's edges: only the samples given to Add count, so callers give a
// window's Peaks the requests sent in that window, and Add ignores samples
// sent before the origin, so requests sent in the warm-up and still in
// flight at the window's start are not counted; the window's requests
// still in flight after it closes (the drain) count until they end, and
// as none is sent then the count only falls, so the peak is reached in the
// window (at the latest at the first tick after it). Merge adds timelines
// tick by tick: the merged peak is that of the summed in-flight count, not
// the sum or the max of the parts' peaks.
//
// Memory is bounded by the span, not the number of requests: 4 kB per
// second of the span the requests cover (see PeakResolution), plus one
// counter per second for the tokens.
//
// Peaks is safe for concurrent use: Add, Merge and Max may be called from
// many goroutines.
type Peaks struct {
	mu       sync.Mutex
	origin   time.Time
	tokens   []int64
	inflight timeline
}

// NewPeaks returns a Peaks whose first bucket and first tick are at origin.
func NewPeaks(origin time.Time) *Peaks { return &Peaks{origin: origin} }

// secCount is n tokens in the one-second bucket sec.
type secCount struct{ sec, n int }

// Add counts one sample; failed samples and samples sent before the origin
// are ignored, as vLLM ignores failed outputs.
func (p *Peaks) Add(s *record.Sample) {
	if s == nil || s.Result == nil || !s.Result.OK() {
		return
	}
	r := s.Result
	send := r.Start.Sub(p.origin)
	if send < 0 {
		return
	}
	// The chunks are bucketed before taking the lock: a request's chunks
	// fall in a few runs of one second each, and samples of every session
	// contend for the lock.
	var buf [8]secCount
	runs := buf[:0]
	count := func(t time.Duration) {
		sec := bucket(t)
		if n := len(runs); n > 0 && runs[n-1].sec == sec {
			runs[n-1].n++
			return
		}
		runs = append(runs, secCount{sec: sec, n: 1})
	}
	t := send + r.TTFT
	count(t)
	for _, gap := range r.ITL {
		t += gap
		count(t)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range runs {
		if c.sec >= 0 && c.sec < MaxPeakSeconds {
			p.tokens = grow(p.tokens, c.sec)
			p.tokens[c.sec] += int64(c.n)
		}
	}
	p.inflight.span(send, send+max(r.E2E, 0))
}

// Merge adds o's token buckets and in-flight timeline into p. Both must
// share one origin.
func (p *Peaks) Merge(o *Peaks) error {
	if o == nil || o == p {
		return nil
	}
	// o is copied under its own lock, then added under p's: never both
	// locks at once, so concurrent p.Merge(o) and o.Merge(p) cannot
	// deadlock.
	o.mu.Lock()
	tokens := append([]int64(nil), o.tokens...)
	inflight := o.inflight.clone()
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
	p.inflight.merge(&inflight)
	return nil
}

// Max returns the highest output tokens in one second and the highest
// number of requests in flight at one instant (vLLM's
// max_output_tokens_per_s and max_concurrent_requests); see Peaks.
func (p *Peaks) Max() (tokensPerSec float64, concurrent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var mt int64
	for _, n := range p.tokens {
		mt = max(mt, n)
	}
	return float64(mt), int(p.inflight.max())
}

func bucket(d time.Duration) int { return int(d / time.Second) }

func grow(s []int64, i int) []int64 {
	if i < len(s) {
		return s
	}
	return append(s, make([]int64, i+1-len(s))...)
}
