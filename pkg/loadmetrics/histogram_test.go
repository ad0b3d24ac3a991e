package loadmetrics

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// written returns what m writes.
func written(t *testing.T, m prometheus.Metric) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram()
}

// collectOne collects the one series of c.
func collectOne(t *testing.T, c prometheus.Collector) *dto.Histogram {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	var got []*dto.Histogram
	for m := range ch {
		got = append(got, written(t, m))
	}
	if len(got) != 1 {
		t.Fatalf("%d series, want 1", len(got))
	}
	return got[0]
}

// TestHistogramMatchesClientGolang: HDR histograms added to a Histogram
// expose exactly what client_golang's own histogram, with the same classic
// buckets and NativeBucketFactor, exposes after observing every bucket's
// midpoint as many times as it counts: classic buckets, schema, zero
// bucket, native spans and deltas, count (the sum up to float rounding).
// Several adds accumulate.
func TestHistogramMatchesClientGolang(t *testing.T) {
	for _, tc := range []struct {
		name    string
		buckets []float64
		values  func(r *rand.Rand) int64 // microseconds
	}{
		{"ttft", TTFTBuckets, func(r *rand.Rand) int64 { return 2000 + r.Int64N(3_000_000) }},
		{"itl with zeros and a wide spread", TokenBuckets, func(r *rand.Rand) int64 {
			if r.IntN(10) == 0 {
				return 0
			}
			return r.Int64N(1 << uint(r.IntN(28)))
		}},
		{"e2e up to the clamp", E2EBuckets, func(r *rand.Rand) int64 { return r.Int64N(hdr.Default.HighestMicros + 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, err := NewHistogram(HistogramOpts{Name: "x_seconds", Help: "x", Buckets: tc.buckets})
			if err != nil {
				t.Fatal(err)
			}
			ref := prometheus.NewHistogram(prometheus.HistogramOpts{
				Name: "x_seconds", Help: "x", Buckets: tc.buckets, NativeHistogramBucketFactor: NativeBucketFactor,
			})
			r := rand.New(rand.NewPCG(1, 2))
			for range 3 {
				h := hdr.Default.New()
				for range 2000 {
					h.RecordValue(tc.values(r))
				}
				ours.Add(h)
				h.Buckets(func(b hdr.Bucket) {
					v := 0.0
					if b.Lowest > 0 {
						v = (float64(b.Lowest) + float64(b.Width)/2) / 1e6
					}
					for range b.Count {
						ref.Observe(v)
					}
				})
			}
			got, want := collectOne(t, ours), written(t, ref)
			if math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-9*want.GetSampleSum() {
				t.Errorf("sum %v, want %v", got.GetSampleSum(), want.GetSampleSum())
			}
			for _, h := range []*dto.Histogram{got, want} {
				h.SampleSum, h.CreatedTimestamp = nil, nil
			}
			if !proto.Equal(got, want) {
				t.Errorf("histograms differ:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestHistogramTouchAndLabels: a touched series is exposed empty (still
// a native histogram, by its zero threshold) with its labels; adds go to
// their own series.
func TestHistogramTouchAndLabels(t *testing.T) {
	v, err := NewHistogram(HistogramOpts{Name: "x_seconds", Help: "x", Buckets: []float64{0.1, 1}}, "mode")
	if err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return time.Unix(100, 0) }
	v.Touch("kv")
	h := collectOne(t, v)
	if h.GetSampleCount() != 0 || h.GetZeroThreshold() <= 0 || len(h.GetBucket()) != 2 || !h.GetCreatedTimestamp().AsTime().Equal(time.Unix(100, 0)) {
		t.Errorf("touched series %v", h)
	}
	one := hdr.Default.New()
	one.Record(500 * time.Millisecond)
	v.Add(one, "rr")
	v.Add(nil, "kv")
	ch := make(chan prometheus.Metric, 4)
	v.Collect(ch)
	close(ch)
	counts := map[string]uint64{}
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		counts[out.GetLabel()[0].GetValue()] = out.GetHistogram().GetSampleCount()
		if b := out.GetHistogram().GetBucket(); out.GetLabel()[0].GetValue() == "rr" && (b[0].GetCumulativeCount() != 0 || b[1].GetCumulativeCount() != 1) {
			t.Errorf("rr classic buckets %v, want the value in le=1", b)
		}
	}
	if counts["kv"] != 0 || counts["rr"] != 1 {
		t.Errorf("series counts %v, want kv 0 and rr 1", counts)
	}
	if _, err := NewHistogram(HistogramOpts{Name: "y_seconds", Help: "y", Buckets: []float64{1, 0.5}}); err == nil {
		t.Error("decreasing buckets accepted")
	}
}

// TestNativeKeyBounds: bucket k holds (2^((k-1)/8), 2^(k/8)].
func TestNativeKeyBounds(t *testing.T) {
	for k := -170; k <= 80; k++ {
		upper := math.Exp2(float64(k) / 8)
		if got := nativeKey(upper); got != k {
			t.Errorf("key of %g = %d, want %d", upper, got, k)
		}
		if got := nativeKey(math.Nextafter(upper, math.Inf(1))); got != k+1 {
			t.Errorf("key just above %g = %d, want %d", upper, got, k+1)
		}
		if got := nativeUpper(k); nativeKey(got) != k || nativeKey(math.Nextafter(got, math.Inf(1))) != k+1 {
			t.Errorf("nativeUpper(%d) = %g, not the top of bucket %d", k, got, k)
		}
	}
}
