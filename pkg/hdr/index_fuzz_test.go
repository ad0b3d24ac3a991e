package hdr

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// twin is a Histogram and an hdrhistogram-go histogram of the same Config
// fed the same values, the library's clamped as RecordValue clamps: the
// reference for the counts Histogram keeps itself.
type twin struct {
	ours *Histogram
	lib  *hdrhistogram.Histogram
}

func newTwin(cfg Config) twin {
	return twin{ours: cfg.New(), lib: hdrhistogram.New(cfg.LowestMicros, cfg.HighestMicros, cfg.SigFigs)}
}

// record records n values drawn by r as fill draws them, and sometimes a
// repeated value through RecordValues.
func (w twin) record(t *testing.T, r *rand.Rand, n int) {
	cfg := w.ours.cfg
	for range n {
		var v int64
		switch r.IntN(6) {
		case 0:
			v = r.Int64N(2048)
		case 1:
			v = r.Int64N(cfg.HighestMicros + 1)
		case 2:
			v = r.Int64N(1 << 20)
		case 3:
			v = cfg.HighestMicros
		case 4:
			v = r.Int64() // mostly clamped
		default:
			k := 1 + r.Int64N(1000)
			v = r.Int64N(1 << 24)
			if err := w.ours.RecordValues(v, k); err != nil {
				t.Fatal(err)
			}
			if err := w.lib.RecordValues(min(max(v, 0), cfg.HighestMicros), k); err != nil {
				t.Fatal(err)
			}
			continue
		}
		w.ours.RecordValue(v)
		if err := w.lib.RecordValue(min(max(v, 0), cfg.HighestMicros)); err != nil {
			t.Fatal(err)
		}
	}
}

// check fails unless w.ours holds exactly the library's counts and total.
func (w twin) check(t *testing.T, what string) {
	t.Helper()
	want := w.lib.Export().Counts
	if !slices.Equal(w.ours.full(), want) || w.ours.Count() != w.lib.TotalCount() {
		t.Fatalf("%s: counts differ from hdrhistogram-go's (count %d, want %d)", what, w.ours.Count(), w.lib.TotalCount())
	}
	// The library view built from our counts is the library's histogram.
	if !w.ours.Unwrap().Equals(w.lib) {
		t.Fatalf("%s: view differs from hdrhistogram-go's histogram", what)
	}
}

// FuzzIndexMerge checks the paths that add by counts index (Record and
// RecordValues, Merge of a full histogram, Merge of a sparse one read
// from its payload) against hdrhistogram-go histograms fed the same
// values and merged with hdrhistogram-go's own Merge, which maps every
// value back to its index: the counts, totals and dropped counts must be
// the library's, and percentiles read from the view must be the library's.
// A large preloaded count drives the total to the edge of int64 so that
// the overflow path drops exactly what the library drops.
//
// Run it with: go test -run='^$' -fuzz=FuzzIndexMerge ./pkg/hdr/
func FuzzIndexMerge(f *testing.F) {
	f.Add(uint64(1), uint16(0), uint16(0), uint8(0), int64(0))
	f.Add(uint64(2), uint16(200), uint16(3000), uint8(1), int64(0))
	f.Add(uint64(3), uint16(4000), uint16(1), uint8(2), int64(0))
	f.Add(uint64(4), uint16(50), uint16(50), uint8(0), int64(math.MaxInt64-100))
	f.Add(uint64(5), uint16(7), uint16(0), uint8(1), int64(1<<62))
	f.Fuzz(func(t *testing.T, seed uint64, nsrc, ndst uint16, geometry uint8, preload int64) {
		cfg := Default
		switch geometry % 3 {
		case 1:
			cfg = otherConfig
		case 2:
			cfg = Config{LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}
		}
		r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
		src, dst := newTwin(cfg), newTwin(cfg)
		src.record(t, r, int(nsrc%4096))
		dst.record(t, r, int(ndst%4096))
		if preload > 0 && preload <= math.MaxInt64-dst.lib.TotalCount() {
			// Toward the edge of int64: merging src may now drop values.
			v := r.Int64N(cfg.HighestMicros + 1)
			if err := dst.ours.RecordValues(v, preload); err != nil {
				t.Fatal(err)
			}
			if err := dst.lib.RecordValues(v, preload); err != nil {
				t.Fatal(err)
			}
		}
		src.check(t, "source")
		dst.check(t, "destination")

		want := dst.lib.Clone()
		wantDropped := want.Merge(src.lib)
		sp, err := FromSparse(cfg, src.ours.Sparse())
		if err != nil {
			t.Fatalf("FromSparse: %v", err)
		}
		for name, from := range map[string]*Histogram{"full": src.ours, "sparse": sp} {
			got := twin{ours: dst.ours.Clone(), lib: want}
			err := got.ours.Merge(from)
			var de *DroppedError
			switch {
			case wantDropped == 0 && err != nil:
				t.Fatalf("%s merge: %v, the library dropped nothing", name, err)
			case wantDropped > 0 && (!errors.As(err, &de) || de.Count != wantDropped):
				t.Fatalf("%s merge: %v, the library dropped %d", name, err, wantDropped)
			}
			got.check(t, name+" merge")
			if got.ours.Count() > 0 {
				for _, p := range []float64{0, 50, 99, 99.9, 100} {
					if g, w := got.ours.Percentile(p), micros(want.ValueAtQuantile(hdrPercentile(p, want.TotalCount()))); p > 0 && g != w {
						t.Fatalf("%s merge: p%v %v, library %v", name, p, g, w)
					}
				}
			}
		}
		if sp.expanded.Load() {
			t.Fatal("merging a sparse histogram expanded it")
		}
	})
}
