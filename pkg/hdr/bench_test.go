package hdr

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// latencies returns n lognormal latencies around 200 ms.
func latencies(n int) []time.Duration {
	r := rand.New(rand.NewPCG(7, 7))
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = time.Duration(math.Exp(math.Log(200_000)+r.NormFloat64())) * time.Microsecond
	}
	return ds
}

func filled(n int) *Histogram {
	h := Default.New()
	h.RecordDurations(latencies(n))
	return h
}

func BenchmarkRecord(b *testing.B) {
	ds := latencies(4096)
	h := Default.New()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Record(ds[i&4095])
		i++
	}
}

func BenchmarkMerge(b *testing.B) {
	src := filled(100_000)
	dst := Default.New()
	b.ReportAllocs()
	for b.Loop() {
		if err := dst.Merge(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSummary(b *testing.B) {
	h := filled(100_000)
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Summary()
	}
}

// BenchmarkEncode is pkg/hdr's own codec against hdrhistogram-go's
// (the plain path: Unwrap().Encode), on the same histogram of 100,000
// latencies: the same-run A/B the hand-written encoder keeps its place by.
func BenchmarkEncode(b *testing.B) {
	h := filled(100_000)
	b.Run("hdr", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			enc, err := h.Encode()
			if err != nil {
				b.Fatal(err)
			}
			n = len(enc)
		}
		b.ReportMetric(float64(n), "bytes/hist")
	})
	b.Run("hdrhistogram-go", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			enc, err := h.Unwrap().Encode(hdrhistogram.V2CompressedEncodingCookieBase)
			if err != nil {
				b.Fatal(err)
			}
			n = len(enc)
		}
		b.ReportMetric(float64(n), "bytes/hist")
	})
}

// BenchmarkDecode is pkg/hdr's decoder against hdrhistogram-go's
// (hdrhistogram.Decode), on the same encoding.
func BenchmarkDecode(b *testing.B) {
	enc, err := filled(100_000).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hdr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(Default, enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hdrhistogram-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := hdrhistogram.Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportHist returns a histogram of 200 values spread over 1 ms..251 ms,
// the size of one metric of an agent's interval report.
func reportHist() *Histogram {
	h := Default.New()
	for i := range 200 {
		h.RecordValue(int64(1000 + (i*7919)%250000))
	}
	return h
}

// BenchmarkMergeDecoded is the V2 path for one report histogram: Decode
// its compressed encoding into a counts array, then Merge it into an
// accumulator.
func BenchmarkMergeDecoded(b *testing.B) {
	enc, err := reportHist().Encode()
	if err != nil {
		b.Fatal(err)
	}
	dst := Default.New()
	b.ReportAllocs()
	for b.Loop() {
		h, err := Decode(Default, enc)
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.Merge(h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergeSparse is the wire path for the same histogram: FromSparse
// validates its sparse form, then Merge adds its buckets into the
// accumulator.
func BenchmarkMergeSparse(b *testing.B) {
	s, dst := reportHist().Sparse(), Default.New()
	b.ReportAllocs()
	for b.Loop() {
		h, err := FromSparse(Default, s)
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.Merge(h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(s.Counts)), "bytes/hist")
}

// BenchmarkMergeSparseOnePass is the coordinator's path for the same
// histogram: MergeSparse checks and adds it in one walk of its payload.
func BenchmarkMergeSparseOnePass(b *testing.B) {
	s, dst := reportHist().Sparse(), Default.New()
	dsts, srcs, out := []*Histogram{dst}, []Sparse{s}, make([]*Histogram, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := MergeSparse(dsts, srcs, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(s.Counts)), "bytes/hist")
}

// BenchmarkMergeSparseReports is MergeSparse as the coordinator runs it:
// reports of 10 histograms (200 values each over 1-251 ms, distinct from
// report to report, 64 reports in turn) into a window's 10 destinations,
// so that neither the caches nor the branch predictor see one payload
// again and again.
func BenchmarkMergeSparseReports(b *testing.B) {
	const hists, reports = 10, 64
	dsts := make([]*Histogram, hists)
	for i := range dsts {
		dsts[i] = Default.New()
	}
	srcs := make([][]Sparse, reports)
	bytes := 0
	for r := range srcs {
		for k := range hists {
			h := Default.New()
			for i := range 200 {
				h.RecordValue(int64(1000 + (i*7919+k*104729+r*15485863)%250000))
			}
			srcs[r] = append(srcs[r], h.Sparse())
			bytes += len(srcs[r][k].Counts)
		}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := MergeSparse(dsts, srcs[n%reports], nil); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(bytes)/reports, "bytes/report")
}

// BenchmarkSparse is the agent's side: one report histogram, and a full
// one, in sparse form.
func BenchmarkSparse(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    *Histogram
	}{{"200-values", reportHist()}, {"100000-values", filled(100_000)}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				n = len(tc.h.Sparse().Counts)
			}
			b.ReportMetric(float64(n), "bytes/hist")
		})
	}
}
