package hdr

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// sparse is a histogram's validated V2 payload: ZigZag LEB128 counts where
// a negative value is a run of zero counts. It is a few hundred bytes for a
// report's histogram where the counts array is ~173 KB. Immutable once
// built, so clones share it.
type sparse struct {
	payload []byte
	g       geometry
	count   int64 // sum of the counts
}

// addTo records every count of s into dst, which must have s's geometry,
// and returns how many values dst refused (only on total count overflow).
// Each non-zero count is recorded at its index's lowest value, which maps
// back to that same index in dst: exactly what hdrhistogram-go's Merge does
// from a full histogram, without scanning the counts array.
func (s *sparse) addTo(dst *hdrhistogram.Histogram) (dropped int64) {
	idx := 0
	for pos := 0; pos < len(s.payload); {
		// validate has checked the payload: no truncated varint, every
		// index in range.
		v, n := readZigZag(s.payload[pos:])
		pos += n
		if v < 0 {
			idx += int(-v)
			continue
		}
		if v > 0 && dst.RecordValues(s.g.valueAt(idx), v) != nil {
			dropped += v
		}
		idx++
	}
	return dropped
}

// expand builds h.h from h.sparse; run once, by hist.
func (h *Histogram) expand() {
	hh := hdrhistogram.New(h.cfg.LowestMicros, h.cfg.HighestMicros, h.cfg.SigFigs)
	// DecodeSparse bounded the indices and the total: an empty histogram
	// takes every count.
	h.sparse.addTo(hh)
	h.h = hh
	h.expanded.Store(true)
}

// DecodeSparse parses and validates b as Decode does, with the same errors,
// but keeps only the encoded buckets (a copy of the inflated payload, a few
// hundred bytes for a typical report) instead of a full counts array. Merging
// the result into another histogram adds each non-zero bucket straight into
// the destination's counts, so merging a report costs its buckets, not the
// geometry's range. Any other use (Summary, Record, Encode, Unwrap...) expands
// it to a full histogram once, safely under concurrent reads. The clamp count
// of the result is 0 (see SetClamped). DecodeSparse is safe for concurrent
// use.
func DecodeSparse(cfg Config, b []byte) (*Histogram, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	c := coders.Get().(*coder)
	defer coders.Put(c)
	payload, s, err := c.inflate(cfg, b)
	if err != nil {
		return nil, err
	}
	// The payload lives in the pooled coder: keep a copy of its exact size.
	s.payload = append([]byte(nil), payload...)
	return &Histogram{cfg: cfg, sparse: &s}, nil
}
