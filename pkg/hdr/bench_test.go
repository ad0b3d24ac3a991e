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
