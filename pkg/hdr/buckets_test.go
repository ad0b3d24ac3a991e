package hdr

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBucketsMatchTheLibrary: a histogram's buckets, read from the full
// histogram and from its sparse decoding, are hdrhistogram-go's non-empty
// bars (lowest and highest equivalent values, counts), in order, and the
// sparse histogram is not expanded by the read.
func TestBucketsMatchTheLibrary(t *testing.T) {
	for _, cfg := range []Config{Default, {LowestMicros: 1000, HighestMicros: 3_600_000_000, SigFigs: 2}} {
		r := rand.New(rand.NewPCG(7, uint64(cfg.SigFigs)))
		h := cfg.New()
		for range 5000 {
			h.RecordValue(r.Int64N(1 << uint(r.IntN(31))))
		}
		h.RecordValue(0)
		h.RecordValue(cfg.HighestMicros)
		var want []Bucket
		for _, b := range h.Unwrap().Distribution() {
			if b.Count > 0 {
				want = append(want, Bucket{Lowest: b.From, Width: b.To - b.From + 1, Count: b.Count})
			}
		}
		collect := func(h *Histogram) []Bucket {
			var got []Bucket
			h.Buckets(func(b Bucket) { got = append(got, b) })
			return got
		}
		if got := collect(h); !slices.Equal(got, want) {
			t.Fatalf("%s: full histogram: %d buckets, want %d\n got %v\nwant %v", cfg.Fingerprint(), len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
		}
		enc, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		sp, err := DecodeSparse(cfg, enc)
		if err != nil {
			t.Fatal(err)
		}
		if got := collect(sp); !slices.Equal(got, want) {
			t.Fatalf("%s: sparse histogram: %d buckets, want %d", cfg.Fingerprint(), len(got), len(want))
		}
		if sp.compact() == nil {
			t.Error("reading the buckets expanded the sparse histogram")
		}
	}
}
