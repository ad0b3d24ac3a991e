package hdr

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// FuzzMergeSparse checks the wire path against hdrhistogram-go's full
// decode: for a random source (empty, one value, the maximum, clamped
// values, wide spreads) and a random destination, merging the source's
// sparse form (Sparse, then FromSparse, then Merge) must give the histogram
// hdrhistogram-go gives by decoding the source's standard V2 encoding and
// merging it with its own Merge. The payload must be the full scan's, byte
// for byte, and the clamp count must travel.
//
// Run it with: go test -run='^$' -fuzz=FuzzMergeSparse ./pkg/hdr/
func FuzzMergeSparse(f *testing.F) {
	f.Add(uint64(1), uint16(0), uint16(0), int64(0), false)
	f.Add(uint64(2), uint16(1), uint16(1), int64(0), false)
	f.Add(uint64(3), uint16(1), uint16(0), Default.HighestMicros, false)
	f.Add(uint64(4), uint16(300), uint16(50), int64(-5), true)
	f.Add(uint64(5), uint16(2000), uint16(2000), int64(1<<62), false)
	f.Add(uint64(6), uint16(4000), uint16(0), int64(2047), true)
	f.Fuzz(func(t *testing.T, seed uint64, nsrc, ndst uint16, extra int64, other bool) {
		cfg := Default
		if other {
			cfg = otherConfig
		}
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		src, dst := cfg.New(), cfg.New()
		fill(r, src, int(nsrc%4096))
		fill(r, dst, int(ndst%4096))
		if nsrc%3 == 0 {
			src.RecordValue(extra)
		}

		s := src.Sparse()
		if want := appendCounts(nil, src.Unwrap().Export().Counts); !bytes.Equal(s.Counts, want) {
			t.Fatalf("payload differs from the full scan's:\n%x\n%x", s.Counts, want)
		}
		sp, err := FromSparse(cfg, s)
		if err != nil {
			t.Fatalf("FromSparse of Sparse: %v", err)
		}
		if sp.Count() != src.Count() || sp.Clamped() != src.Clamped() {
			t.Fatalf("sparse count %d clamped %d, source %d %d", sp.Count(), sp.Clamped(), src.Count(), src.Clamped())
		}

		// The reference: hdrhistogram-go decodes the source's standard
		// encoding into a full histogram and merges it.
		enc, err := src.Unwrap().Encode(hdrhistogram.V2CompressedEncodingCookieBase)
		if err != nil {
			t.Fatal(err)
		}
		full, err := hdrhistogram.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		want := dst.Unwrap().Clone()
		if dropped := want.Merge(full); dropped != 0 {
			t.Fatalf("reference merge dropped %d", dropped)
		}

		got := dst.Clone()
		if err := got.Merge(sp); err != nil {
			t.Fatal(err)
		}
		if !got.Unwrap().Equals(want) {
			t.Fatalf("sparse merge differs: got %+v, want %d values", got.Summary(), want.TotalCount())
		}
		if got.Clamped() != dst.Clamped()+src.Clamped() {
			t.Fatalf("clamped %d, want %d", got.Clamped(), dst.Clamped()+src.Clamped())
		}
		if sp.expanded.Load() {
			t.Fatal("merging a sparse histogram expanded it")
		}
		// A clone of the sparse histogram stays sparse and merges the same.
		again := dst.Clone()
		if err := again.Merge(sp.Clone()); err != nil || !again.Equal(got) {
			t.Fatalf("merge of a sparse clone differs (err %v)", err)
		}
		// Any other use expands it to the source histogram.
		if sp.Summary() != src.Summary() || !sp.Equal(src) || !sp.Unwrap().Equals(full) {
			t.Fatal("expanded sparse histogram differs from the source")
		}
		// After expansion, merging it and its sparse form still agree.
		after := dst.Clone()
		if err := after.Merge(sp); err != nil || !after.Equal(got) {
			t.Fatalf("merge of an expanded sparse histogram differs (err %v)", err)
		}
		if back := sp.Sparse(); !bytes.Equal(back.Counts, s.Counts) {
			t.Fatal("Sparse of the expanded histogram differs")
		}
	})
}

// FuzzFromSparse feeds FromSparse arbitrary payloads, totals and clamp
// counts, as a hostile or broken agent could send them. It must never
// panic and must refuse with ErrCorrupt or ErrConfigMismatch. It must agree
// with hdrhistogram-go reading the same payload behind the standard V2
// headers: what FromSparse accepts, hdrhistogram-go decodes to the same
// histogram, and a payload hdrhistogram-go decodes is accepted with its
// true total and a clamp count within it (bit 64 of geometry takes the
// reference's total, so that the fuzzer reaches valid payloads). The seed
// corpus is in testdata/fuzz/FuzzFromSparse (valid payloads and each kind
// of damage).
//
// Run it with: go test -run='^$' -fuzz=FuzzFromSparse ./pkg/hdr/
func FuzzFromSparse(f *testing.F) {
	f.Fuzz(func(t *testing.T, counts []byte, total, clamped int64, geometry uint8) {
		cfg := Default
		switch geometry % 3 {
		case 1:
			cfg = otherConfig
		case 2:
			cfg = Config{LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}
		}
		ref, refErr := hdrhistogram.Decode(v2Encoding(t, cfg, counts))
		if geometry&64 != 0 && refErr == nil {
			total = ref.TotalCount()
			if clamped < 0 || clamped > total {
				clamped = 0
			}
		}
		in := Sparse{Config: cfg, Counts: counts, Total: total, Clamped: clamped}
		if geometry&128 != 0 {
			in.Config = otherConfig // a mismatch unless cfg is otherConfig
		}
		h, err := FromSparse(cfg, in)
		if err != nil {
			if h != nil {
				t.Fatal("FromSparse returned a histogram with an error")
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrConfigMismatch) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrConfigMismatch", err)
			}
			if in.Config == cfg && refErr == nil && total == ref.TotalCount() && clamped >= 0 && clamped <= total {
				t.Fatalf("FromSparse refused a payload hdrhistogram-go decodes: %v", err)
			}
			return
		}
		if in.Config != cfg || h.Count() != total || h.Clamped() != clamped {
			t.Fatalf("accepted %s as %s with count %d clamped %d", in.Config.Fingerprint(), cfg.Fingerprint(), h.Count(), h.Clamped())
		}
		if refErr != nil {
			t.Fatalf("FromSparse accepted a payload hdrhistogram-go refuses: %v", refErr)
		}
		dst := cfg.New()
		if err := dst.Merge(h); err != nil {
			t.Fatalf("merge: %v", err)
		}
		if !dst.Unwrap().Equals(ref) || dst.Count() != ref.TotalCount() {
			t.Fatal("merged histogram differs from hdrhistogram-go's decode")
		}
		// Re-encoded, it is the same histogram (the payload may be
		// written differently: zero runs split or explicit zeros).
		back, err := FromSparse(cfg, h.Sparse())
		if err != nil || !back.Equal(h) {
			t.Fatalf("round trip through Sparse differs (err %v)", err)
		}
	})
}
