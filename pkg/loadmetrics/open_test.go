package loadmetrics

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// equalHists fails unless got and want hold the same series with the same
// buckets, counts and zero buckets, and sums equal up to float rounding.
func equalHists(t *testing.T, what string, got, want map[string]*dto.Histogram) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d series, want %d", what, len(got), len(want))
	}
	for l, w := range want {
		g := got[l]
		if g == nil {
			t.Fatalf("%s: no series %s", what, l)
		}
		if math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
			t.Errorf("%s, series %s: sum %v, want %v", what, l, g.GetSampleSum(), w.GetSampleSum())
		}
		g, w = proto.Clone(g).(*dto.Histogram), proto.Clone(w).(*dto.Histogram)
		g.SampleSum, w.SampleSum = nil, nil
		if !proto.Equal(g, w) {
			t.Fatalf("%s, series %s: histograms differ:\n got %v\nwant %v", what, l, g, w)
		}
	}
}

// TestSetOpenMatchesAdd plays the coordinator: windows open one after
// another (two at a time), each merging reports and publishing its whole
// state now and then with SetOpen, then once more, final, when it closes;
// another Histogram gets every report with Add. At every publication and
// at the end, the series equal the Add one's as of the reports published:
// contributions replace each other, settle once, and never count twice.
func TestSetOpenMatchesAdd(t *testing.T) {
	opts := HistogramOpts{Name: "x_seconds", Help: "x", Buckets: TTFTBuckets}
	open, err := NewHistogram(opts, "level")
	if err != nil {
		t.Fatal(err)
	}
	each, err := NewHistogram(opts, "level")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*Histogram{open, each} {
		v.now = func() time.Time { return time.Unix(100, 0) }
	}
	r := rand.New(rand.NewPCG(5, 6))
	report := func() *hdr.Histogram {
		h := hdr.Default.New()
		for range 1 + r.IntN(200) {
			if r.IntN(30) == 0 {
				h.RecordValue(0)
			} else {
				h.RecordValue(r.Int64N(1 << uint(8+r.IntN(22))))
			}
		}
		return h
	}
	type win struct {
		key    uint64
		level  string
		merged *hdr.Histogram
	}
	var live []*win
	// pending are the reports each added to each's series but not yet
	// published by their window; they go to each when published.
	pending := map[*win][]*hdr.Histogram{}
	publish := func(w *win, final bool) {
		open.SetOpen(w.key, w.merged, final, w.level)
		for _, h := range pending[w] {
			each.Add(h, w.level)
		}
		delete(pending, w)
		equalHists(t, "window "+strconv.FormatUint(w.key, 10), collectAll(t, open), collectAll(t, each))
	}
	for key := uint64(1); key <= 12; key++ {
		w := &win{key: key, level: strconv.Itoa(int(key) % 3), merged: hdr.Default.New()}
		live = append(live, w)
		if key == 5 {
			// A window that closes with nothing merged.
			publish(w, true)
			live = live[:len(live)-1]
			continue
		}
		for i := range 40 {
			v := live[r.IntN(len(live))]
			h := report()
			if err := v.merged.Merge(h); err != nil {
				t.Fatal(err)
			}
			pending[v] = append(pending[v], h)
			if i%9 == 0 {
				publish(v, false)
			}
		}
		if len(live) == 2 {
			publish(live[0], true)
			live = live[1:]
		}
	}
	for _, w := range live {
		publish(w, true)
	}
	for _, s := range open.series {
		if len(s.open) != 0 {
			t.Errorf("%d contributions left open after every final call", len(s.open))
		}
	}
}

// TestSetOpenNeverFalls: a scrape between publications of a growing
// window never reads a count below the previous scrape's.
func TestSetOpenNeverFalls(t *testing.T) {
	v, err := NewHistogram(HistogramOpts{Name: "x_seconds", Help: "x", Buckets: TTFTBuckets}, "level")
	if err != nil {
		t.Fatal(err)
	}
	a, b := hdr.Default.New(), hdr.Default.New()
	var last uint64
	for i := range 50 {
		w := a
		if i%2 == 1 {
			w = b
		}
		w.RecordValue(int64(1000 + i*37))
		v.SetOpen(uint64(i%2), w, i == 40, "1")
		if i == 40 {
			a = hdr.Default.New() // window 0 closed; key 0 starts afresh
		}
		got := collectAll(t, v)["1"].GetSampleCount()
		if got < last || got != uint64(i+1) {
			t.Fatalf("publication %d: count %d after %d, want %d", i, got, last, i+1)
		}
		last = got
	}
}
