package loadmetrics

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// collectAll collects every series of c by its first label's value.
func collectAll(t *testing.T, c prometheus.Collector) map[string]*dto.Histogram {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	out := map[string]*dto.Histogram{}
	for m := range ch {
		var w dto.Metric
		if err := m.Write(&w); err != nil {
			t.Fatal(err)
		}
		out[w.GetLabel()[0].GetValue()] = w.GetHistogram()
	}
	return out
}

// TestDeferredAddsMatchImmediate: sparse histograms queued on several
// series, interleaved with full ones (converted at once), and scrapes at
// random points expose exactly what a Histogram scraped after every add
// (each add converted at once) exposes: every bucket, count and zero
// bucket; the sum up to float rounding (it is summed in other batches).
// A queue never holds maxQueued histograms: it folds first.
func TestDeferredAddsMatchImmediate(t *testing.T) {
	opts := HistogramOpts{Name: "x_seconds", Help: "x", Buckets: TTFTBuckets}
	lazy, err := NewHistogram(opts, "level")
	if err != nil {
		t.Fatal(err)
	}
	eager, err := NewHistogram(opts, "level")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*Histogram{lazy, eager} {
		v.now = func() time.Time { return time.Unix(100, 0) }
	}
	r := rand.New(rand.NewPCG(3, 4))
	const levels = 4
	for i := range 200 {
		h := hdr.Default.New()
		for range 1 + r.IntN(300) {
			if r.IntN(20) == 0 {
				h.RecordValue(0)
			} else {
				h.RecordValue(r.Int64N(1 << uint(10+r.IntN(20))))
			}
		}
		if i%2 == 0 {
			sp, err := hdr.FromSparse(hdr.Default, h.Sparse())
			if err != nil {
				t.Fatal(err)
			}
			h = sp
		}
		level := strconv.Itoa(r.IntN(levels))
		if i > 150 {
			level = "0" // a long run on one series
		}
		if i == 180 {
			// More than a queue holds, between two scrapes.
			one := hdr.Default.New()
			one.RecordValue(1234)
			sp, err := hdr.FromSparse(hdr.Default, one.Sparse())
			if err != nil {
				t.Fatal(err)
			}
			for range 2*maxQueued + 1 {
				lazy.Add(sp, level)
				eager.Add(sp, level)
			}
			if n := len(lazy.series[level].queued); n >= maxQueued {
				t.Fatalf("%d histograms queued, at most %d", n, maxQueued-1)
			}
		}
		lazy.Add(h, level)
		eager.Add(h, level)
		collectAll(t, eager) // converts at once
		if r.IntN(25) == 0 || i == 199 {
			got, want := collectAll(t, lazy), collectAll(t, eager)
			if len(got) != len(want) {
				t.Fatalf("add %d: %d series, want %d", i, len(got), len(want))
			}
			for l, w := range want {
				g := got[l]
				if math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
					t.Errorf("add %d level %s: sum %v, want %v", i, l, g.GetSampleSum(), w.GetSampleSum())
				}
				g, w = proto.Clone(g).(*dto.Histogram), proto.Clone(w).(*dto.Histogram)
				g.SampleSum, w.SampleSum = nil, nil
				if !proto.Equal(g, w) {
					t.Fatalf("add %d level %s: histograms differ:\n got %v\nwant %v", i, l, g, w)
				}
			}
		}
	}
}
