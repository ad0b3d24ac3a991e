package hdr

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
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

func BenchmarkEncode(b *testing.B) {
	h := filled(100_000)
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
}

func BenchmarkDecode(b *testing.B) {
	enc, err := filled(100_000).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(Default, enc); err != nil {
			b.Fatal(err)
		}
	}
}

// reportHist encodes a histogram of 200 values spread over 1 ms..251 ms,
// the size of one metric of an agent's interval report.
func reportHist(b *testing.B) []byte {
	h := Default.New()
	for i := range 200 {
		h.RecordValue(int64(1000 + (i*7919)%250000))
	}
	enc, err := h.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

// BenchmarkMergeDecoded is the full path for one report histogram: Decode
// into a counts array, then Merge it into an accumulator.
func BenchmarkMergeDecoded(b *testing.B) {
	enc, dst := reportHist(b), Default.New()
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

// BenchmarkMergeSparse is the sparse path for the same histogram:
// DecodeSparse, then Merge its buckets into the accumulator.
func BenchmarkMergeSparse(b *testing.B) {
	enc, dst := reportHist(b), Default.New()
	b.ReportAllocs()
	for b.Loop() {
		h, err := DecodeSparse(Default, enc)
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.Merge(h); err != nil {
			b.Fatal(err)
		}
	}
}
