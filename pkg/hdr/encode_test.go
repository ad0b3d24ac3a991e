package hdr

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// inflate returns the inner (uncompressed) V2 bytes of an encoding.
func inflate(t *testing.T, b []byte) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		t.Fatal(err)
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[outerHeaderLen:]))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return inner
}

// TestEncodeMatchesHdrHistogramGo checks that Encode writes the standard
// format: the outer cookie and the inflated header and payload are byte for
// byte what hdrhistogram-go writes, and each side decodes the other's
// encoding to the same histogram.
func TestEncodeMatchesHdrHistogramGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	configs := []Config{Default, {LowestMicros: 1000, HighestMicros: 1 << 40, SigFigs: 2}, {LowestMicros: 3, HighestMicros: 5000, SigFigs: 5}}
	for _, cfg := range configs {
		for _, n := range []int{0, 1, 7, 1000, 50_000} {
			h := cfg.New()
			for range n {
				h.RecordValue(int64(r.ExpFloat64() * float64(cfg.HighestMicros) / 50))
			}
			ours, err := h.Encode()
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := h.Unwrap().Encode(hdrhistogram.V2CompressedEncodingCookieBase)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ours[:8], theirs[:8]) {
				t.Errorf("%s n=%d: outer header %q, hdrhistogram-go %q", cfg.Fingerprint(), n, ours[:8], theirs[:8])
			}
			if a, b := inflate(t, ours), inflate(t, theirs); !bytes.Equal(a, b) {
				t.Errorf("%s n=%d: inner bytes differ (%d vs %d bytes)", cfg.Fingerprint(), n, len(a), len(b))
			}
			lib, err := hdrhistogram.Decode(ours)
			if err != nil {
				t.Fatalf("hdrhistogram-go cannot read Encode's output: %v", err)
			}
			if !lib.Equals(h.Unwrap()) {
				t.Errorf("%s n=%d: hdrhistogram-go decodes a different histogram", cfg.Fingerprint(), n)
			}
			got, err := Decode(cfg, theirs)
			if err != nil {
				t.Fatalf("Decode of hdrhistogram-go's encoding: %v", err)
			}
			got.SetClamped(h.Clamped())
			if !got.Equal(h) {
				t.Errorf("%s n=%d: Decode of hdrhistogram-go's encoding differs", cfg.Fingerprint(), n)
			}
		}
	}
}

// BenchmarkEncodeLevels compares zlib levels on a realistic interval
// histogram (200 values, as one agent report per second carries) and a full
// one: CPU per encode against encoded bytes.
func BenchmarkEncodeLevels(b *testing.B) {
	for _, n := range []int{200, 100_000} {
		h := filled(n)
		counts := h.full()
		raw := appendCounts(make([]byte, innerHeaderLen), counts)
		for _, lv := range []struct {
			name  string
			level int
		}{{"best-speed", zlib.BestSpeed}, {"default", zlib.DefaultCompression}, {"best", zlib.BestCompression}} {
			b.Run(lv.name+"/"+strconv.Itoa(n)+"-values", func(b *testing.B) {
				var buf bytes.Buffer
				zw, _ := zlib.NewWriterLevel(&buf, lv.level)
				b.ReportAllocs()
				for b.Loop() {
					buf.Reset()
					zw.Reset(&buf)
					_, _ = zw.Write(raw)
					_ = zw.Close()
				}
				b.ReportMetric(float64(base64.StdEncoding.EncodedLen(buf.Len()+outerHeaderLen)), "bytes/hist")
			})
		}
	}
}
