package hdr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// FuzzMergeSparseAll checks MergeSparse's one-pass check-and-add against
// the two passes it replaces, FromSparse then Merge, for a report of
// three sources into two destinations (the first one twice, as two turns
// above MaxTurnIndex share one): two valid sources and an arbitrary one
// (payload, total, clamp count, geometry as FuzzFromSparse takes them, and
// its seed corpus) at any position. MergeSparse must refuse exactly when
// FromSparse refuses one of the sources, naming the first with
// FromSparse's error, and then leave every destination as it was; else
// give the destinations Merge gives, and the sources as FromSparse
// returns them; with a nil out, the same destinations and error. Bit 64 of geometry takes the payload's own total, so that
// the fuzzer reaches valid payloads.
//
// Run it with: go test -run='^$' -fuzz=FuzzMergeSparseAll ./pkg/hdr/
func FuzzMergeSparseAll(f *testing.F) {
	f.Add([]byte{0x02, 0x03, 0x04}, int64(2), int64(0), uint8(64))
	f.Add([]byte{0x02, 0x80}, int64(1), int64(0), uint8(1))
	f.Add([]byte{0x02, 0xff, 0xff, 0x0f, 0x02}, int64(2), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, counts []byte, total, clamped int64, geometry uint8) {
		cfg := Default
		switch geometry % 3 {
		case 1:
			cfg = otherConfig
		case 2:
			cfg = Config{LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}
		}
		if geometry&64 != 0 {
			if sum, err := validate(counts, geometryOf(cfg)); err == nil {
				total = sum
				if clamped < 0 || clamped > total {
					clamped = 0
				}
			}
		}
		in := Sparse{Config: cfg, Counts: counts, Total: total, Clamped: clamped}
		if geometry&128 != 0 {
			in.Config = otherConfig // a mismatch unless cfg is otherConfig
		}
		r := rand.New(rand.NewPCG(uint64(len(counts)), uint64(geometry)))
		a, b := cfg.New(), cfg.New()
		fill(r, a, r.IntN(300))
		fill(r, b, r.IntN(300))
		srcs := make([]Sparse, 0, 3)
		for range 2 {
			h := cfg.New()
			fill(r, h, r.IntN(300))
			srcs = append(srcs, h.Sparse())
		}
		at := int(geometry>>3) % 3
		srcs = append(srcs[:at], append([]Sparse{in}, srcs[at:]...)...)
		dsts := []*Histogram{a, b, a}

		// The reference: FromSparse each source, then Merge them.
		wantA, wantB := a.Clone(), b.Clone()
		want := []*Histogram{wantA, wantB, wantA}
		refs := make([]*Histogram, len(srcs))
		bad, var0 := -1, error(nil)
		for i, s := range srcs {
			h, err := FromSparse(cfg, s)
			if err != nil {
				bad, var0 = i, err
				break
			}
			refs[i] = h
		}

		// The same merge without the sources handed back (out nil) must
		// do the same to its own copies of the destinations.
		a2, b2 := a.Clone(), b.Clone()
		err2 := MergeSparse([]*Histogram{a2, b2, a2}, srcs, nil)
		out := make([]*Histogram, len(srcs))
		err := MergeSparse(dsts, srcs, out)
		if fmt.Sprint(err2) != fmt.Sprint(err) || !a2.Equal(a) || !b2.Equal(b) {
			t.Fatalf("MergeSparse with a nil out: %v, %+v and %+v; with out: %v, %+v and %+v",
				err2, a2.Summary(), b2.Summary(), err, a.Summary(), b.Summary())
		}
		if bad >= 0 {
			var se *SparseError
			if !errors.As(err, &se) || se.Index != bad || err.Error() != var0.Error() {
				t.Fatalf("MergeSparse = %v, want source %d refused with %q", err, bad, var0)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrConfigMismatch) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrConfigMismatch", err)
			}
			if !a.Equal(wantA) || !b.Equal(wantB) {
				t.Fatal("a refused merge changed a destination")
			}
			for i, h := range out {
				if h != nil {
					t.Fatalf("a refused merge returned source %d", i)
				}
			}
			return
		}
		// Counts past MaxInt64 in a destination are dropped and counted,
		// by MergeSparse as by Merge.
		var gotDropped, wantDropped int64
		if d := (*DroppedError)(nil); errors.As(err, &d) {
			gotDropped = d.Count
		} else if err != nil {
			t.Fatalf("MergeSparse refused what FromSparse accepts: %v", err)
		}
		for i, h := range refs {
			if err := want[i].Merge(h); err != nil {
				d := (*DroppedError)(nil)
				if !errors.As(err, &d) {
					t.Fatal(err)
				}
				wantDropped += d.Count
			}
			switch {
			case h.Count() == 0 && out[i] != nil:
				t.Fatalf("empty source %d returned as %+v", i, out[i].Summary())
			case h.Count() > 0 && (out[i] == nil || !out[i].IsSparse() || !out[i].Equal(h)):
				t.Fatalf("source %d returned differs from FromSparse's", i)
			}
		}
		if !a.Equal(wantA) || !b.Equal(wantB) {
			t.Fatalf("merged %+v and %+v, want %+v and %+v", a.Summary(), b.Summary(), wantA.Summary(), wantB.Summary())
		}
		if gotDropped != wantDropped {
			t.Fatalf("MergeSparse dropped %d values, Merge %d", gotDropped, wantDropped)
		}
	})
}
