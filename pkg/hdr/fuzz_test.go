package hdr

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and what
// it accepts must have Default's geometry and survive a re-encode.
func FuzzDecode(f *testing.F) {
	for _, vs := range [][]int64{nil, {1}, {0, 5, 2048, 1_000_000, 600_000_000}} {
		h := Default.New()
		for _, v := range vs {
			h.RecordValue(v)
		}
		b, err := h.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	other := Config{LowestMicros: 1000, HighestMicros: 1 << 40, SigFigs: 2}.New()
	other.RecordValue(12345)
	if b, err := other.Encode(); err == nil {
		f.Add(b)
	}
	f.Add([]byte("HISTFAAAACR4nJNpmSzMwMDAwgABzFCaEUoz2Ua4k0w"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(Default, b)
		// DecodeSparse accepts exactly what Decode accepts, as the same
		// histogram.
		sp, spErr := DecodeSparse(Default, b)
		if (err == nil) != (spErr == nil) {
			t.Fatalf("Decode error %v, DecodeSparse error %v", err, spErr)
		}
		if err == nil && (sp.Count() != h.Count() || !sp.Equal(h)) {
			t.Fatal("DecodeSparse differs from Decode")
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrConfigMismatch) {
				t.Fatalf("Decode error %v wraps neither ErrCorrupt nor ErrConfigMismatch", err)
			}
			return
		}
		if h.Config() != Default {
			t.Fatalf("accepted geometry %s", h.Config().Fingerprint())
		}
		_ = h.Summary()
		b2, err := h.Encode()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		h2, err := Decode(Default, b2)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if !h2.Equal(h) {
			t.Fatal("re-encode round trip changed the histogram")
		}
	})
}
