package hdr

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// FuzzMergeSparse checks the sparse merge against the full decode and
// Merge: for a random destination and a random source (empty, one value,
// the maximum, clamped values, wide spreads), merging DecodeSparse's result
// must give the same histogram as merging Decode's, and the sparse
// histogram must read exactly as the decoded one.
func FuzzMergeSparse(f *testing.F) {
	f.Add(uint64(1), uint16(0), uint16(0), int64(0))
	f.Add(uint64(2), uint16(1), uint16(1), int64(0))
	f.Add(uint64(3), uint16(1), uint16(0), Default.HighestMicros)
	f.Add(uint64(4), uint16(300), uint16(50), int64(-5))
	f.Add(uint64(5), uint16(2000), uint16(2000), int64(1<<62))
	f.Fuzz(func(t *testing.T, seed uint64, nsrc, ndst uint16, extra int64) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		fill := func(h *Histogram, n int) {
			for range n {
				switch r.IntN(4) {
				case 0:
					h.RecordValue(r.Int64N(2048)) // exact range
				case 1:
					h.RecordValue(r.Int64N(Default.HighestMicros + 1))
				case 2:
					h.RecordValue(r.Int64N(1 << 20))
				default:
					h.RecordValue(r.Int64()) // mostly clamped
				}
			}
		}
		src, dst := Default.New(), Default.New()
		fill(src, int(nsrc%4096))
		fill(dst, int(ndst%4096))
		if nsrc%3 == 0 {
			src.RecordValue(extra)
		}
		b, err := src.Encode()
		if err != nil {
			t.Fatal(err)
		}
		full, err := Decode(Default, b)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := DecodeSparse(Default, b)
		if err != nil {
			t.Fatal(err)
		}
		full.SetClamped(src.Clamped())
		sp.SetClamped(src.Clamped())
		if sp.Count() != full.Count() {
			t.Fatalf("sparse count %d, decoded %d", sp.Count(), full.Count())
		}

		want, got := dst.Clone(), dst.Clone()
		if err := want.Merge(full); err != nil {
			t.Fatal(err)
		}
		if err := got.Merge(sp); err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Fatalf("sparse merge differs: got %+v, want %+v", got.Summary(), want.Summary())
		}
		if got.Clamped() != dst.Clamped()+src.Clamped() {
			t.Fatalf("clamped %d, want %d", got.Clamped(), dst.Clamped()+src.Clamped())
		}
		// A clone of the sparse histogram stays sparse and merges the same.
		again := dst.Clone()
		if err := again.Merge(sp.Clone()); err != nil || !again.Equal(want) {
			t.Fatalf("merge of a sparse clone differs (err %v)", err)
		}
		// Any other use expands it to the decoded histogram.
		if sp.Summary() != full.Summary() || !sp.Equal(full) || !sp.Equal(src) {
			t.Fatal("expanded sparse histogram differs from the decoded one")
		}
		// After expansion, merging it still gives the same result.
		after := dst.Clone()
		if err := after.Merge(sp); err != nil || !after.Equal(want) {
			t.Fatalf("merge of an expanded sparse histogram differs (err %v)", err)
		}
	})
}

// TestDecodeSparseGeometryMismatch checks that a histogram encoded with
// another geometry is refused, and that a sparse histogram of another
// Config does not merge and leaves the destination unchanged.
func TestDecodeSparseGeometryMismatch(t *testing.T) {
	other := Config{LowestMicros: 1, HighestMicros: 3_600_000_000, SigFigs: 2}
	h := other.New()
	h.RecordValue(12345)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSparse(Default, b); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("DecodeSparse of %s as %s: error %v, want ErrConfigMismatch", other.Fingerprint(), Default.Fingerprint(), err)
	}
	sp, err := DecodeSparse(other, b)
	if err != nil {
		t.Fatal(err)
	}
	sp.SetClamped(3)
	dst := Default.New()
	dst.RecordValue(7)
	before := dst.Clone()
	if err := dst.Merge(sp); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("Merge error %v, want ErrConfigMismatch", err)
	}
	if !dst.Equal(before) {
		t.Fatal("a refused merge changed the destination")
	}
}

// TestDecodeSparseCorrupt checks that DecodeSparse refuses what Decode
// refuses, with the same sentinel.
func TestDecodeSparseCorrupt(t *testing.T) {
	h := Default.New()
	h.RecordValue(1000)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"empty":      nil,
		"truncated":  b[:len(b)/2],
		"not base64": []byte("!!!!"),
	} {
		t.Run(name, func(t *testing.T) {
			_, errFull := Decode(Default, in)
			_, errSparse := DecodeSparse(Default, in)
			if !errors.Is(errSparse, ErrCorrupt) || !errors.Is(errFull, ErrCorrupt) {
				t.Fatalf("DecodeSparse error %v, Decode error %v: want ErrCorrupt from both", errSparse, errFull)
			}
		})
	}
}
