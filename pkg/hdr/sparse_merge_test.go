package hdr

import (
	"errors"
	"math"
	"testing"
)

// TestMergeSparseNearMaxTotal covers MergeSparse's other path, taken when
// a destination's total could pass math.MaxInt64: it drops what Merge
// drops, and still refuses a bad report whole.
func TestMergeSparseNearMaxTotal(t *testing.T) {
	src := Default.New()
	for v := range int64(5) {
		src.RecordValue(1000 + v)
	}
	full := func() *Histogram {
		h := Default.New()
		if err := h.RecordValues(2000, math.MaxInt64-3); err != nil {
			t.Fatal(err)
		}
		return h
	}
	t.Run("drops as Merge", func(t *testing.T) {
		got, want := full(), full()
		wantErr := want.Merge(src)
		out := make([]*Histogram, 1)
		err := MergeSparse([]*Histogram{got}, []Sparse{src.Sparse()}, out)
		var gd, wd *DroppedError
		if !errors.As(err, &gd) || !errors.As(wantErr, &wd) || gd.Count != wd.Count {
			t.Fatalf("MergeSparse = %v, Merge = %v: want the same drop", err, wantErr)
		}
		if !got.Equal(want) || out[0] == nil || !out[0].Equal(src) {
			t.Fatal("merged differently from Merge")
		}
	})
	t.Run("refuses whole", func(t *testing.T) {
		got, other := full(), Default.New()
		bad := src.Sparse()
		bad.Total++
		out := make([]*Histogram, 2)
		err := MergeSparse([]*Histogram{other, got}, []Sparse{src.Sparse(), bad}, out)
		var se *SparseError
		if !errors.As(err, &se) || se.Index != 1 || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("MergeSparse = %v, want source 1 refused as corrupt", err)
		}
		if !got.Equal(full()) || other.Count() != 0 || out[0] != nil {
			t.Fatal("a refused merge changed a destination")
		}
	})
}
