package record

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// benchSample is a realistic streamed request: 500 ITL gaps.
func benchSample(r *rand.Rand, window uint32) *Sample {
	itl := make([]time.Duration, 500)
	for i := range itl {
		itl[i] = time.Duration(10_000+r.IntN(20_000)) * time.Microsecond
	}
	return &Sample{
		Window: window, Turn: 1 + r.IntN(8), Intended: base,
		Result: &client.Result{
			Start: base.Add(time.Millisecond), TTFB: 50 * time.Millisecond, TTFT: 180 * time.Millisecond,
			E2E: 8 * time.Second, ITL: itl, PromptTokens: 3000, OutputTokens: 501, CachedTokens: 2000, UsageReported: true,
		},
	}
}

func BenchmarkRecorderRecord(b *testing.B) {
	rec := NewRecorder(hdr.Default)
	s := benchSample(rand.New(rand.NewPCG(1, 1)), 0)
	b.ReportAllocs()
	for b.Loop() {
		rec.Record(s)
	}
}

func BenchmarkRecorderRecordParallel(b *testing.B) {
	rec := NewRecorder(hdr.Default)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := benchSample(rand.New(rand.NewPCG(rand.Uint64(), 1)), 0)
		for pb.Next() {
			rec.Record(s)
		}
	})
}

func BenchmarkWindowMerge(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	src := NewWindow(0, hdr.Default)
	for range 2000 {
		src.Add(benchSample(r, 0))
	}
	dst := NewWindow(0, hdr.Default)
	b.ReportAllocs()
	for b.Loop() {
		if err := dst.Merge(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecorderDrain(b *testing.B) {
	rec := NewRecorder(hdr.Default)
	s := benchSample(rand.New(rand.NewPCG(3, 3)), 0)
	b.ReportAllocs()
	for b.Loop() {
		rec.Record(s)
		_ = rec.Drain()
	}
}
