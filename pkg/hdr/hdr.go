package hdr

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ErrConfigMismatch is returned when histograms of different configurations
// are merged or decoded.
var ErrConfigMismatch = errors.New("histogram configuration mismatch")

// ErrDropped is returned (wrapped in a *DroppedError that carries the count)
// when a merge could not record some values. With matching configurations
// this only happens when a total count would overflow int64.
var ErrDropped = errors.New("histogram values dropped")

// DroppedError reports how many values a Merge dropped. errors.Is(err,
// ErrDropped) holds for it; use errors.As to read Count.
type DroppedError struct {
	Count int64
}

// Error implements error.
func (e *DroppedError) Error() string {
	return fmt.Sprintf("merge histogram: %d values dropped", e.Count)
}

// Unwrap returns ErrDropped.
func (e *DroppedError) Unwrap() error { return ErrDropped }

// Config is a histogram configuration. Values are recorded in microseconds.
// A Config is a plain value, safe to copy and share.
type Config struct {
	// LowestMicros is the lowest discernible value (the first bucket's
	// resolution); at least 1.
	LowestMicros int64
	// HighestMicros is the highest trackable value; larger values are
	// clamped to it and counted. At least 2*LowestMicros.
	HighestMicros int64
	// SigFigs is the number of significant decimal digits kept, 1..5.
	SigFigs int
}

// Default is fleetbench's configuration: 1 µs to 10 min, 3 significant figures.
var Default = Config{LowestMicros: 1, HighestMicros: int64(10 * time.Minute / time.Microsecond), SigFigs: 3}

// Validate reports whether c describes a histogram HdrHistogram can build.
// Configs read from flags, files or the network must pass it before New.
func (c Config) Validate() error {
	switch {
	case c.LowestMicros < 1:
		return fmt.Errorf("validate histogram config: lowest %d µs is below 1", c.LowestMicros)
	case c.HighestMicros < 2*c.LowestMicros || c.HighestMicros > math.MaxInt64/int64(time.Microsecond):
		// The upper bound keeps every value representable as a time.Duration.
		return fmt.Errorf("validate histogram config: highest %d µs is out of range for lowest %d µs", c.HighestMicros, c.LowestMicros)
	case c.SigFigs < 1 || c.SigFigs > 5:
		return fmt.Errorf("validate histogram config: %d significant figures is not in 1..5", c.SigFigs)
	case math.Floor(math.Log2(float64(c.LowestMicros)))+math.Ceil(math.Log2(2*math.Pow10(c.SigFigs)))-1 > 61:
		// HdrHistogram's own representability limit (unit magnitude plus
		// sub-bucket half-count magnitude); New would panic beyond it.
		return fmt.Errorf("validate histogram config: lowest %d µs is too large for %d significant figures", c.LowestMicros, c.SigFigs)
	}
	return nil
}

// Fingerprint returns a short stable string that identifies the bucket
// geometry, e.g. "hdr-v1:1:600000000:3". Two histograms merge only when
// their fingerprints are equal; carry it next to encoded histograms.
func (c Config) Fingerprint() string {
	return fmt.Sprintf("hdr-v1:%d:%d:%d", c.LowestMicros, c.HighestMicros, c.SigFigs)
}

// New returns an empty Histogram of this configuration. It panics if c is
// invalid (see Validate); Default is valid.
func (c Config) New() *Histogram {
	if err := c.Validate(); err != nil {
		panic("hdr: " + err.Error())
	}
	g := geometryOf(c)
	return &Histogram{cfg: c, g: g, counts: make([]int64, g.countsLen)}
}

// Histogram is an HdrHistogram of microsecond values with a clamp counter.
//
// It owns its counts array, indexed exactly as hdrhistogram-go indexes its
// own, so that recording and merging add by index (a report's sparse
// payload is added bucket by bucket straight into the counts, with no
// value-to-index round trip). Percentiles, Summary and Unwrap read an
// hdrhistogram-go histogram built from the counts on first use after a
// change and kept until the next change.
//
// A Histogram is not safe for concurrent use: like the hdrhistogram-go
// histogram it stands for, it has no locking of its counts. Concurrent
// reads are safe only while nothing mutates it; callers serialize Record,
// RecordValues, Merge, Reset and SetClamped against every other use
// (pkg/record does so under its Recorder's mutex). The one-time builds a
// read may trigger (the library view, the expansion of a sparse histogram)
// are safe under concurrent reads.
//
// A Histogram from FromSparse holds only its encoded buckets until it is
// used other than as the source of a Merge, an Encode, a Sparse or a
// Buckets (see FromSparse).
type Histogram struct {
	cfg     Config
	g       geometry
	counts  []int64 // nil in a sparse histogram until expanded
	total   int64
	clamped int64
	// gen counts the changes of the counts, so that the library view
	// knows when it is stale.
	gen uint64

	// lazy marks a histogram built by FromSparse: sparse holds its counts
	// and never changes after; expand builds counts from it once, on the
	// first use that needs the counts array.
	lazy     bool
	sparse   sparse
	expanded atomic.Bool

	// mu guards the one-time expansion and the library view.
	mu      sync.Mutex
	view    *hdrhistogram.Histogram
	viewGen uint64
}

// full returns h's counts array, expanding a sparse histogram once.
func (h *Histogram) full() []int64 {
	if h.lazy && !h.expanded.Load() {
		h.mu.Lock()
		if !h.expanded.Load() {
			counts := make([]int64, h.g.countsLen)
			// The payload was validated (indices and total in range):
			// empty counts take every count.
			var total int64
			h.sparse.addTo(counts, &total)
			h.counts = counts
			h.expanded.Store(true)
		}
		h.mu.Unlock()
	}
	return h.counts
}

// hist returns the hdrhistogram-go histogram of h's counts, building it
// when h changed since the last build.
func (h *Histogram) hist() *hdrhistogram.Histogram {
	counts := h.full()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.view != nil && h.viewGen == h.gen {
		return h.view
	}
	if h.view == nil {
		// Import copies the counts into the library's own array, of the
		// same geometry (New's), and sums them.
		h.view = hdrhistogram.Import(&hdrhistogram.Snapshot{
			LowestTrackableValue: h.cfg.LowestMicros, HighestTrackableValue: h.cfg.HighestMicros,
			SignificantFigures: int64(h.cfg.SigFigs), Counts: counts,
		})
	} else {
		// Reuse the view's storage: each count recorded at its index's
		// lowest value lands on that index.
		h.view.Reset()
		for i, c := range counts {
			if c != 0 {
				_ = h.view.RecordValues(h.g.valueAt(i), c)
			}
		}
	}
	h.viewGen = h.gen
	return h.view
}

// compact returns h's sparse form while h has not been expanded (so the
// sparse form is still all of its counts), else nil.
func (h *Histogram) compact() *sparse {
	if !h.lazy || h.expanded.Load() {
		return nil
	}
	return &h.sparse
}

// Config returns the configuration h was built with.
func (h *Histogram) Config() Config { return h.cfg }

// Record records d, truncated to whole microseconds (clamped and counted when
// outside 0..HighestMicros).
func (h *Histogram) Record(d time.Duration) {
	h.RecordValue(d.Microseconds())
}

// RecordDurations records every element of ds, as Record does.
func (h *Histogram) RecordDurations(ds []time.Duration) {
	counts := h.full()
	for _, d := range ds {
		v := d.Microseconds()
		if v < 0 || v > h.cfg.HighestMicros {
			v = min(max(v, 0), h.cfg.HighestMicros)
			h.clamped++
		}
		counts[h.g.indexOf(v)]++
	}
	h.total += int64(len(ds))
	h.gen++
}

// RecordValue records a value in microseconds. A negative value is recorded
// as 0 and a value above HighestMicros as HighestMicros; both are counted in
// Clamped.
func (h *Histogram) RecordValue(micros int64) {
	if micros < 0 || micros > h.cfg.HighestMicros {
		micros = min(max(micros, 0), h.cfg.HighestMicros)
		h.clamped++
	}
	// The value is in range now. A total count past math.MaxInt64 is not
	// checked: 9e18 recordings cannot be reached in practice.
	h.full()[h.g.indexOf(micros)]++
	h.total++
	h.gen++
}

// RecordValues records n occurrences of a value in microseconds, clamped
// (all n counted in Clamped) as RecordValue clamps. It records nothing and
// returns a *DroppedError (wrapping ErrDropped) when n would take the total
// count past math.MaxInt64; n <= 0 records nothing.
func (h *Histogram) RecordValues(micros, n int64) error {
	if n <= 0 {
		return nil
	}
	if n > math.MaxInt64-h.total {
		return &DroppedError{Count: n}
	}
	if micros < 0 || micros > h.cfg.HighestMicros {
		micros = min(max(micros, 0), h.cfg.HighestMicros)
		h.clamped += n
	}
	h.full()[h.g.indexOf(micros)] += n
	h.total += n
	h.gen++
	return nil
}

// Merge adds every value of o (and its clamp count) into h; o is unchanged.
// It returns an error wrapping ErrConfigMismatch, and changes nothing, when
// the configurations differ. Counts that would take h's total past
// math.MaxInt64 are not added, as hdrhistogram-go's Merge drops them: the
// others are merged and the error is a *DroppedError wrapping ErrDropped.
//
// Both add by index: a sparse o (FromSparse) costs its populated buckets,
// read straight from its payload; a full o one pass over its counts.
func (h *Histogram) Merge(o *Histogram) error {
	if h.cfg != o.cfg {
		return fmt.Errorf("merge histogram %s into %s: %w", o.cfg.Fingerprint(), h.cfg.Fingerprint(), ErrConfigMismatch)
	}
	if o == h {
		// Read the source before it changes.
		o = o.Clone()
	}
	dst := h.full()
	h.clamped += o.clamped
	h.gen++
	var dropped int64
	if s := o.compact(); s != nil {
		dropped = s.addTo(dst, &h.total)
	} else {
		dropped = addCounts(dst, &h.total, o.full())
	}
	if dropped > 0 {
		return &DroppedError{Count: dropped}
	}
	return nil
}

// addCounts adds src into dst, index by index, and their sum into *total,
// skipping (and returning the sum of, saturating) the counts that would
// take *total past math.MaxInt64, as hdrhistogram-go's Merge does.
func addCounts(dst []int64, total *int64, src []int64) (dropped int64) {
	t := *total
	dst = dst[:len(src)]
	for i, c := range src {
		if c == 0 {
			continue
		}
		if c > math.MaxInt64-t {
			dropped = addDropped(dropped, c)
			continue
		}
		dst[i] += c
		t += c
	}
	*total = t
	return dropped
}

// addDropped returns d+c saturated at math.MaxInt64.
func addDropped(d, c int64) int64 {
	if c > math.MaxInt64-d {
		return math.MaxInt64
	}
	return d + c
}

// Count returns the number of values recorded, clamped ones included.
func (h *Histogram) Count() int64 { return h.total }

// Clamped returns how many of the recorded values were outside
// 0..HighestMicros and recorded at the nearest bound. The V2 encoding does
// not carry it: whoever ships an encoded histogram ships Clamped next to it
// and restores it with SetClamped after Decode. The Sparse form carries it.
func (h *Histogram) Clamped() int64 { return h.clamped }

// SetClamped sets the clamp count, for restoring it after Decode.
func (h *Histogram) SetClamped(n int64) { h.clamped = n }

// Percentile returns the value at percentile p (0..100, not 0..1) by the
// nearest-rank definition: the smallest recorded value such that at least p%
// of the values are at or below it, reported as the highest value equivalent
// to it (see the package doc). p <= 0 returns the minimum (lowest equivalent
// value), p >= 100 the maximum. An empty histogram returns 0.
func (h *Histogram) Percentile(p float64) time.Duration {
	return micros(h.valueAt(p))
}

// valueAt returns the nearest-rank value at percentile p in microseconds.
func (h *Histogram) valueAt(p float64) int64 {
	hh := h.hist()
	n := hh.TotalCount()
	if n == 0 {
		return 0
	}
	if !(p > 0) { // also NaN
		return hh.Min()
	}
	return hh.ValueAtQuantile(hdrPercentile(p, n))
}

// hdrPercentile maps percentile p to the percentile argument for which
// hdrhistogram-go, which rounds its rank to nearest (int(p/100*n + 0.5)),
// selects the nearest rank ceil(p/100*n) instead.
func hdrPercentile(p float64, n int64) float64 {
	k := nearestRank(p, n)
	return 100 * float64(k) / float64(n)
}

// nearestRank returns ceil(p/100*n) clamped to 1..n. A product within 1e-9
// relative of an integer is taken as that integer so that, e.g., p99.9 of
// 200,000 values is rank 199,800 despite float rounding.
func nearestRank(p float64, n int64) int64 {
	if p >= 100 {
		return n
	}
	x := p / 100 * float64(n)
	r := math.Round(x)
	var k int64
	if math.Abs(x-r) <= 1e-9*math.Max(1, x) {
		k = int64(r)
	} else {
		k = int64(math.Ceil(x))
	}
	return min(max(k, 1), n)
}

// Summary is the usual set of statistics of one histogram. Durations follow
// the package's reporting convention; all are zero for an empty histogram.
type Summary struct {
	Count                    int64
	Mean, Std, Min, Max      time.Duration
	P50, P90, P95, P99, P999 time.Duration
}

// summaryPercentiles are the percentiles of Summary, in field order.
var summaryPercentiles = [...]float64{50, 90, 95, 99, 99.9}

// Summary returns count, mean, standard deviation, min, max and the p50, p90,
// p95, p99 and p99.9 percentiles (as Percentile computes them).
func (h *Histogram) Summary() Summary {
	hh := h.hist()
	n := hh.TotalCount()
	if n == 0 {
		return Summary{}
	}
	// One scan for min (percentile 0: lowest equivalent value), the
	// percentiles and max (percentile 100: highest equivalent value), which
	// saves the full passes of Min and Max.
	var ps [len(summaryPercentiles) + 2]float64
	for i, p := range summaryPercentiles {
		ps[i+1] = hdrPercentile(p, n)
	}
	ps[len(ps)-1] = 100
	v := hh.ValueAtPercentilesSlice(ps[:])
	return Summary{
		Count: n,
		Mean:  microsF(hh.Mean()),
		Std:   microsF(hh.StdDev()),
		Min:   micros(v[0]),
		Max:   micros(v[6]),
		P50:   micros(v[1]),
		P90:   micros(v[2]),
		P95:   micros(v[3]),
		P99:   micros(v[4]),
		P999:  micros(v[5]),
	}
}

// Clone returns an independent deep copy of h, clamp count included. The
// clone of a sparse histogram not yet expanded is sparse too (its encoded
// buckets are immutable and shared).
func (h *Histogram) Clone() *Histogram {
	if s := h.compact(); s != nil {
		return &Histogram{cfg: h.cfg, g: h.g, total: h.total, clamped: h.clamped, lazy: true, sparse: *s}
	}
	return &Histogram{cfg: h.cfg, g: h.g, counts: slices.Clone(h.full()), total: h.total, clamped: h.clamped}
}

// Reset empties h and zeroes its clamp count, keeping its storage.
func (h *Histogram) Reset() {
	clear(h.full())
	h.total, h.clamped = 0, 0
	h.gen++
}

// Equal reports whether h and o have the same configuration, counts and
// clamp count.
func (h *Histogram) Equal(o *Histogram) bool {
	return h.cfg == o.cfg && h.clamped == o.clamped && h.total == o.total && slices.Equal(h.full(), o.full())
}

// Unwrap returns an hdrhistogram-go histogram of h's counts, for reading
// (iteration, percentile distributions, interval logs). It is a view
// rebuilt from h's counts after h changes: values recorded into it are not
// recorded into h (use RecordValues), and it is valid until h next
// changes. It shares h's contract of no use concurrent with a change of h.
func (h *Histogram) Unwrap() *hdrhistogram.Histogram { return h.hist() }

func micros(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

func microsF(v float64) time.Duration {
	return time.Duration(math.Round(v * float64(time.Microsecond)))
}
