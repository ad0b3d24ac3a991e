package hdr

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// otherConfig is a geometry other than Default's, with a unit magnitude
// above 0 (lowest 1000 µs), for the index arithmetic.
var otherConfig = Config{LowestMicros: 1000, HighestMicros: 1 << 40, SigFigs: 2}

// fill records n values drawn by r over the whole range of h, the exact
// range below 2,048 µs, typical latencies and clamped values.
func fill(r *rand.Rand, h *Histogram, n int) {
	for range n {
		switch r.IntN(5) {
		case 0:
			h.RecordValue(r.Int64N(2048))
		case 1:
			h.RecordValue(r.Int64N(h.cfg.HighestMicros + 1))
		case 2:
			h.RecordValue(r.Int64N(1 << 20))
		case 3:
			h.RecordValue(h.cfg.HighestMicros)
		default:
			h.RecordValue(r.Int64()) // mostly clamped
		}
	}
}

// v2Encoding wraps a V2 payload of cfg's geometry in the standard headers
// and zlib stream, base64 encoded, as hdrhistogram-go's Decode reads it.
func v2Encoding(t testing.TB, cfg Config, payload []byte) []byte {
	t.Helper()
	inner := make([]byte, innerHeaderLen, innerHeaderLen+len(payload))
	binary.BigEndian.PutUint32(inner[0:], uint32(uncompressedCookie))
	binary.BigEndian.PutUint32(inner[4:], uint32(len(payload)))
	binary.BigEndian.PutUint32(inner[12:], uint32(cfg.SigFigs))
	binary.BigEndian.PutUint64(inner[16:], uint64(cfg.LowestMicros))
	binary.BigEndian.PutUint64(inner[24:], uint64(cfg.HighestMicros))
	binary.BigEndian.PutUint64(inner[32:], math.Float64bits(1))
	inner = append(inner, payload...)
	var z bytes.Buffer
	z.Write(make([]byte, outerHeaderLen))
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(inner); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out := z.Bytes()
	binary.BigEndian.PutUint32(out[0:], uint32(compressedCookie))
	binary.BigEndian.PutUint32(out[4:], uint32(len(out)-outerHeaderLen))
	return []byte(base64.StdEncoding.EncodeToString(out))
}

// TestSparseMatchesFullScan checks the agent's side: Sparse's payload,
// written from the populated buckets, is byte for byte the payload of a
// full scan of the exported counts array (what hdrhistogram-go writes), for
// empty, single-value, boundary and spread histograms of several
// geometries; and FromSparse gives back the same histogram.
func TestSparseMatchesFullScan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, cfg := range []Config{Default, otherConfig, {LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}} {
		cases := map[string]func(h *Histogram){
			"empty":        func(*Histogram) {},
			"zero":         func(h *Histogram) { h.RecordValue(0) },
			"index one":    func(h *Histogram) { h.RecordValue(geometryOf(h.cfg).valueAt(1)) },
			"highest":      func(h *Histogram) { h.RecordValue(h.cfg.HighestMicros) },
			"clamped":      func(h *Histogram) { h.RecordValue(-1); h.RecordValue(math.MaxInt64) },
			"spread":       func(h *Histogram) { fill(r, h, 1000) },
			"dense":        func(h *Histogram) { fill(r, h, 100_000) },
			"large counts": func(h *Histogram) { _ = h.RecordValues(1234, 1<<60) },
		}
		for name, rec := range cases {
			t.Run(cfg.Fingerprint()+"/"+name, func(t *testing.T) {
				h := cfg.New()
				rec(h)
				s := h.Sparse()
				if want := appendCounts(nil, h.Unwrap().Export().Counts); !bytes.Equal(s.Counts, want) {
					t.Fatalf("payload %x, full scan %x", s.Counts, want)
				}
				if s.Config != cfg || s.Total != h.Count() || s.Clamped != h.Clamped() {
					t.Fatalf("sparse form %v/%d/%d, want %v/%d/%d", s.Config, s.Total, s.Clamped, cfg, h.Count(), h.Clamped())
				}
				back, err := FromSparse(cfg, s)
				if err != nil {
					t.Fatal(err)
				}
				// Sparse of a sparse histogram reads its payload back
				// without expanding it.
				if again := back.Sparse(); !bytes.Equal(again.Counts, s.Counts) || again.Total != s.Total || again.Clamped != s.Clamped || back.expanded.Load() {
					t.Fatal("Sparse of a sparse histogram differs or expanded it")
				}
				if !back.Equal(h) {
					t.Fatal("FromSparse(Sparse()) differs from the histogram")
				}
			})
		}
	}
}

// TestFromSparseRejects feeds FromSparse the bad reports a network can
// bring: each is refused with the right sentinel, never a panic.
func TestFromSparseRejects(t *testing.T) {
	g := geometryOf(Default)
	zz := func(vs ...int64) []byte {
		var b []byte
		for _, v := range vs {
			b = appendZigZag(b, v)
		}
		return b
	}
	ok := Default.New()
	ok.RecordValue(1000)
	good := ok.Sparse()
	tests := []struct {
		name string
		cfg  Config
		s    Sparse
		want error
	}{
		{"geometry mismatch", Default, Sparse{Config: otherConfig, Counts: good.Counts, Total: 1}, ErrConfigMismatch},
		{"no geometry", Default, Sparse{Counts: good.Counts, Total: 1}, ErrConfigMismatch},
		{"invalid config", Config{}, Sparse{Counts: good.Counts, Total: 1}, nil},
		{"truncated varint", Default, Sparse{Config: Default, Counts: []byte{0x80}, Total: 0}, ErrCorrupt},
		{"truncated after a count", Default, Sparse{Config: Default, Counts: append(zz(-5, 3), 0xff, 0xff), Total: 3}, ErrCorrupt},
		{"count past the array", Default, Sparse{Config: Default, Counts: zz(-int64(g.countsLen), 1), Total: 1}, ErrCorrupt},
		{"zero run past the array", Default, Sparse{Config: Default, Counts: zz(-int64(g.countsLen) - 1), Total: 0}, ErrCorrupt},
		{"MinInt64 run", Default, Sparse{Config: Default, Counts: zz(math.MinInt64), Total: 0}, ErrCorrupt},
		{"counts sum past MaxInt64", Default, Sparse{Config: Default, Counts: zz(math.MaxInt64, 1), Total: 0}, ErrCorrupt},
		{"total too low", Default, Sparse{Config: Default, Counts: good.Counts, Total: 0}, ErrCorrupt},
		{"total too high", Default, Sparse{Config: Default, Counts: good.Counts, Total: 2}, ErrCorrupt},
		{"negative clamp count", Default, Sparse{Config: Default, Counts: good.Counts, Total: 1, Clamped: -1}, ErrCorrupt},
		{"clamp count above total", Default, Sparse{Config: Default, Counts: good.Counts, Total: 1, Clamped: 2}, ErrCorrupt},
		{"payload too long", Default, Sparse{Config: Default, Counts: make([]byte, g.countsLen*maxVarint+1), Total: 0}, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := FromSparse(tt.cfg, tt.s)
			if err == nil || h != nil {
				t.Fatalf("FromSparse accepted it (%v)", h)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
	// What is well formed is accepted: an empty payload, a zero run to the
	// end of the array, explicit zero counts.
	for name, counts := range map[string][]byte{"empty": nil, "zero run to the end": zz(-int64(g.countsLen)), "zeros": zz(0, 0, 0, 7)} {
		total := int64(0)
		if name == "zeros" {
			total = 7
		}
		h, err := FromSparse(Default, Sparse{Config: Default, Counts: counts, Total: total})
		if err != nil || h.Count() != total {
			t.Errorf("%s: FromSparse = %v, %v", name, h, err)
		}
	}
}

// TestSparseGeometryMismatchMerge checks that a sparse histogram of
// another Config does not merge and leaves the destination unchanged.
func TestSparseGeometryMismatchMerge(t *testing.T) {
	h := otherConfig.New()
	h.RecordValue(12345)
	sp, err := FromSparse(otherConfig, h.Sparse())
	if err != nil {
		t.Fatal(err)
	}
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

// TestSparseMergeOverflow checks that a sparse merge that would overflow
// the destination's total reports the dropped values, as Merge of a full
// histogram does.
func TestSparseMergeOverflow(t *testing.T) {
	src := Default.New()
	_ = src.RecordValues(100, math.MaxInt64-1)
	sp, err := FromSparse(Default, src.Sparse())
	if err != nil {
		t.Fatal(err)
	}
	dst := Default.New()
	dst.RecordValue(5)
	dst.RecordValue(11)
	var de *DroppedError
	if err := dst.Merge(sp); !errors.As(err, &de) || de.Count != math.MaxInt64-1 {
		t.Fatalf("Merge error %v, want %d values dropped", err, int64(math.MaxInt64-1))
	}
	if dst.Count() != 2 {
		t.Fatalf("count %d after a dropped merge, want 2", dst.Count())
	}
}

// TestIndexOf checks the index arithmetic against hdrhistogram-go through
// valueAt, the way appendPayload uses it: every index of several
// geometries maps back to itself.
func TestIndexOf(t *testing.T) {
	for _, cfg := range []Config{Default, otherConfig, {LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}, {LowestMicros: 1, HighestMicros: 2, SigFigs: 1}} {
		g := geometryOf(cfg)
		hh := hdrhistogram.New(cfg.LowestMicros, cfg.HighestMicros, cfg.SigFigs)
		for i := range g.countsLen {
			if got := g.indexOf(g.valueAt(i)); got != i {
				t.Fatalf("%s: indexOf(valueAt(%d)) = %d", cfg.Fingerprint(), i, got)
			}
		}
		if n := len(hh.Export().Counts); n != g.countsLen {
			t.Fatalf("%s: %d counts, hdrhistogram-go has %d", cfg.Fingerprint(), g.countsLen, n)
		}
	}
}
