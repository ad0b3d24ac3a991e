package loadmetrics

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// NativeBucketFactor is the growth factor asked of the native (sparse)
// buckets, as client_golang's HistogramOpts.NativeHistogramBucketFactor
// takes it. The largest schema whose buckets grow by at most that much is
// 3: each bucket is 2^(1/8) ≈ 1.0905 times the previous, so a quantile
// Prometheus estimates from them is within about 9% of the true one.
const NativeBucketFactor = 1.1

// nativeSchema is the native buckets' schema for NativeBucketFactor.
const nativeSchema = 3

// nativeBounds are the fractions (of math.Frexp) at which the native
// buckets of one power of two begin: 2^(j/8 - 1), as client_golang's
// nativeHistogramBounds for schema 3.
var nativeBounds = func() []float64 {
	n := 1 << nativeSchema
	b := make([]float64, n)
	for j := range b {
		b[j] = math.Exp2(float64(j)/float64(n) - 1)
	}
	return b
}()

// nativeKey returns the native bucket of v > 0: bucket k holds
// (2^((k-1)/8), 2^(k/8)], as client_golang's histogram computes it.
func nativeKey(v float64) int {
	frac, exp := math.Frexp(v)
	return sort.SearchFloat64s(nativeBounds, frac) + (exp-1)*len(nativeBounds)
}

// nativeUpper returns the upper bound of native bucket k: the largest
// value nativeKey maps to k.
func nativeUpper(k int) float64 {
	n := len(nativeBounds)
	j, e := k%n, k/n
	if j < 0 {
		j, e = j+n, e-1
	}
	return math.Ldexp(nativeBounds[j], e+1)
}

// HistogramOpts describe a Histogram.
type HistogramOpts struct {
	// Name and Help are the metric's.
	Name, Help string
	// Buckets are the classic buckets' upper bounds in seconds, increasing
	// (+Inf is implied).
	Buckets []float64
}

// Histogram is a histogram vector fed whole HDR histograms of durations,
// exposed with both classic buckets (HistogramOpts.Buckets) and native
// buckets (schema 3, NativeBucketFactor), as a client_golang histogram
// with both kinds would be: a scraper that negotiates native histograms
// reads the native buckets, any other reads the classic ones.
//
// It holds cumulative counts per series and adds an HDR histogram at the
// cost of its non-empty buckets (a few hundred for a report), where
// calling Observe once per recorded value would cost every value: each
// HDR bucket's classic and native bucket come from a table of the HDR
// counts indices, and a sparse histogram is queued and converted with the
// others of its series when the series is collected (see queue). Each HDR
// bucket is counted at its midpoint: the true values lie within the HDR
// bucket's width (0.1% at 3 significant figures), so only a value that
// close to a classic or native bucket's bound can land on the other side
// of it. A recorded 0 goes to the zero bucket.
//
// Add and Touch are safe for concurrent use with each other and with
// collection.
type Histogram struct {
	desc   *prometheus.Desc
	bounds []float64

	mu     sync.Mutex
	series map[string]*series
	now    func() time.Time
	table  *indexTable // of the Config of the histograms added
	// acc accumulates queued histograms by index when a series folds.
	acc *hdr.Histogram
}

var _ prometheus.Collector = (*Histogram)(nil)

// series is one label set's cumulative counts, guarded by Histogram.mu.
type series struct {
	labels  []*dto.LabelPair
	classic []uint64 // per bound, not cumulative; the last is +Inf
	native  []uint64 // native buckets nativeLow, nativeLow+1, ...
	low     int
	zero    uint64
	count   uint64
	sum     float64
	created time.Time

	// queued are sparse histograms added since the last fold (see
	// queue).
	queued []*hdr.Histogram
	// open are the contributions of open histograms by key (see
	// SetOpen), added at collection.
	open map[uint64]*series
}

// NewHistogram returns an empty Histogram with the given variable labels.
func NewHistogram(opts HistogramOpts, labelNames ...string) (*Histogram, error) {
	if !slices.IsSorted(opts.Buckets) || len(opts.Buckets) == 0 {
		return nil, fmt.Errorf("new histogram %s: buckets must be increasing and not empty", opts.Name)
	}
	if len(opts.Buckets) > math.MaxUint8-1 {
		// Add maps HDR buckets to classic ones through a byte per index.
		return nil, fmt.Errorf("new histogram %s: %d buckets, at most %d", opts.Name, len(opts.Buckets), math.MaxUint8-1)
	}
	for i := 1; i < len(opts.Buckets); i++ {
		if opts.Buckets[i] == opts.Buckets[i-1] {
			return nil, fmt.Errorf("new histogram %s: bucket %g repeated", opts.Name, opts.Buckets[i])
		}
	}
	return &Histogram{
		desc:   prometheus.NewDesc(opts.Name, opts.Help, labelNames, nil),
		bounds: slices.Clone(opts.Buckets),
		series: make(map[string]*series),
		now:    time.Now,
	}, nil
}

// get returns the series of labelValues, creating it; v.mu is held.
func (v *Histogram) get(labelValues []string) *series {
	key := strings.Join(labelValues, "\xff")
	s := v.series[key]
	if s == nil {
		s = &series{
			labels:  prometheus.MakeLabelPairs(v.desc, labelValues),
			classic: make([]uint64, len(v.bounds)+1),
			created: v.now(),
		}
		v.series[key] = s
	}
	return s
}

// Touch makes the series of labelValues exist, with no observation, so
// that a scraper reads it at 0 before the first values arrive (rate()
// and increase() then see every value). The number of label values must
// be the number of label names.
func (v *Histogram) Touch(labelValues ...string) {
	v.mu.Lock()
	v.get(labelValues)
	v.mu.Unlock()
}

// Add adds every value recorded in h (microseconds) to the series of
// labelValues, in seconds. A nil or empty h changes nothing.
func (v *Histogram) Add(h *hdr.Histogram, labelValues ...string) {
	if h == nil || h.Count() == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queue(v.get(labelValues), h)
}

// child returns the series of labelValues, creating it, for addTo.
func (v *Histogram) child(labelValues []string) *series {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.get(labelValues)
}

// addTo adds h to s, a series of v (from child): Add without resolving
// the labels again.
func (v *Histogram) addTo(s *series, h *hdr.Histogram) {
	if h == nil || h.Count() == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queue(s, h)
}

// add adds every value of h to s; the Histogram's mu is held and tab is
// its table of h's Config.
func (s *series) add(h *hdr.Histogram, tab *indexTable) {
	// Each HDR bucket's classic bucket and native key come from tab, by
	// its index. Buckets come in increasing order, so the native keys do
	// too: a run of buckets of one key is added at once. The sum of the
	// midpoints is exact in 128-bit integers of half microseconds (the
	// midpoint of a bucket of width 1 is a half microsecond), converted
	// once.
	key, first := 0, true
	var run uint64 // values of native bucket key not yet added
	var hi, lo uint64
	h.IndexedBuckets(func(i int, b hdr.Bucket) {
		n := uint64(b.Count)
		s.count += n
		s.classic[tab.classic[i]] += n
		if i == 0 {
			// A recorded 0 (a gap within one read): the zero bucket.
			s.zero += n
			return
		}
		if k := int(tab.native[i]); k != key || first {
			if run > 0 {
				s.addNative(key, run)
			}
			key, run, first = k, 0, false
		}
		run += n
		ph, pl := bits.Mul64(uint64(2*b.Lowest+b.Width), n)
		var carry uint64
		lo, carry = bits.Add64(lo, pl, 0)
		hi += ph + carry
	})
	if run > 0 {
		s.addNative(key, run)
	}
	s.sum += (float64(hi)*0x1p64 + float64(lo)) / 2e6
}

// indexTable maps every counts index of one hdr.Config to its classic
// bucket and native bucket key, as Add counts an HDR bucket: at its
// midpoint in seconds. It turns Add's float arithmetic per bucket into two
// lookups in small tables: the classic one is a byte per index (a
// Histogram's own), the native one is shared by every Histogram of the
// Config.
type indexTable struct {
	cfg     hdr.Config
	classic []uint8 // index into series.classic
	native  []int16 // native bucket key; unused at index 0
}

// newIndexTable builds the table of cfg for the classic bounds (fewer
// than 256, see NewHistogram).
func newIndexTable(cfg hdr.Config, bounds []float64) *indexTable {
	n := cfg.Buckets()
	t := &indexTable{cfg: cfg, classic: make([]uint8, n), native: nativeTable(cfg)}
	for i := 1; i < n; i++ {
		// The first bound at or above the midpoint; len(bounds) is +Inf.
		t.classic[i] = uint8(sort.SearchFloat64s(bounds, midpoint(cfg.BucketAt(i))))
	}
	return t
}

// midpoint returns the midpoint of an HDR bucket in seconds.
func midpoint(b hdr.Bucket) float64 {
	return (float64(b.Lowest) + float64(b.Width)/2) / 1e6
}

// nativeTables holds the native keys of every counts index, per
// hdr.Config (a []int16 per Config; in practice one, hdr.Default).
var nativeTables sync.Map

// nativeTable returns the native bucket key of every counts index of cfg.
func nativeTable(cfg hdr.Config) []int16 {
	if t, ok := nativeTables.Load(cfg); ok {
		return t.([]int16)
	}
	t := make([]int16, cfg.Buckets())
	for i := 1; i < len(t); i++ {
		t[i] = int16(nativeKey(midpoint(cfg.BucketAt(i))))
	}
	got, _ := nativeTables.LoadOrStore(cfg, t)
	return got.([]int16)
}

// tableOf returns v's index table of cfg, building it on first use;
// v.mu is held.
func (v *Histogram) tableOf(cfg hdr.Config) *indexTable {
	if v.table == nil || v.table.cfg != cfg {
		v.table = newIndexTable(cfg, v.bounds)
	}
	return v.table
}

// addNative adds n to native bucket k, growing the slice as needed.
func (s *series) addNative(k int, n uint64) {
	switch {
	case len(s.native) == 0:
		if cap(s.native) == 0 {
			s.native = make([]uint64, 0, 64)
		}
		s.native, s.low = append(s.native, 0), k
	case k < s.low:
		grown := make([]uint64, len(s.native)+s.low-k, cap(s.native)+s.low-k)
		copy(grown[s.low-k:], s.native)
		s.native, s.low = grown, k
	case k >= s.low+len(s.native):
		s.native = append(s.native, make([]uint64, k-s.low-len(s.native)+1)...)
	}
	s.native[k-s.low] += n
}

// Describe implements prometheus.Collector.
func (v *Histogram) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector: one histogram per series.
func (v *Histogram) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	ms := make([]prometheus.Metric, 0, len(v.series))
	for _, s := range v.series {
		v.fold(s)
		ms = append(ms, &metric{desc: v.desc, labels: s.labels, h: s.withOpen().write(v.bounds)})
	}
	v.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
}

// write returns s as a histogram with classic and native buckets.
func (s *series) write(bounds []float64) *dto.Histogram {
	h := &dto.Histogram{
		SampleCount:      new(s.count),
		SampleSum:        new(s.sum),
		CreatedTimestamp: timestamppb.New(s.created),
		Bucket:           make([]*dto.Bucket, len(bounds)),
		Schema:           new(int32(nativeSchema)),
		ZeroThreshold:    new(prometheus.DefNativeHistogramZeroThreshold),
		ZeroCount:        new(s.zero),
	}
	var cum uint64
	for i, b := range bounds {
		cum += s.classic[i]
		h.Bucket[i] = &dto.Bucket{CumulativeCount: new(cum), UpperBound: new(b)}
	}
	h.PositiveSpan, h.PositiveDelta = spans(s.native, s.low)
	return h
}

// spans encodes native bucket counts (bucket low first) as spans and
// deltas, as client_golang does: a gap of one or two empty buckets is
// written as zeros, a longer one starts a new span.
func spans(counts []uint64, low int) ([]*dto.BucketSpan, []int64) {
	var (
		out    []*dto.BucketSpan
		deltas []int64
		prev   int64
		next   int
		first  = true
	)
	appendDelta := func(c int64) {
		*out[len(out)-1].Length++
		deltas = append(deltas, c-prev)
		prev = c
	}
	for j, c := range counts {
		if c == 0 {
			continue
		}
		k := low + j
		gap := int32(k - next)
		if first || gap > 2 {
			out = append(out, &dto.BucketSpan{Offset: new(gap), Length: new(uint32(0))})
			first = false
		} else {
			for range gap {
				appendDelta(0)
			}
		}
		appendDelta(int64(c))
		next = k + 1
	}
	return out, deltas
}

// metric is one collected series.
type metric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	h      *dto.Histogram
}

func (m *metric) Desc() *prometheus.Desc { return m.desc }

func (m *metric) Write(out *dto.Metric) error {
	out.Label, out.Histogram = m.labels, m.h
	return nil
}

// register registers every collector with reg (nil: none), joining the
// errors.
func register(reg prometheus.Registerer, what string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("register %s metrics: %w", what, err)
	}
	return nil
}
