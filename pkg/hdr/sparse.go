package hdr

import (
	"fmt"
	"iter"
	"math"
)

// Sparse is a histogram in the uncompressed form agents send the
// coordinator: its configuration, its counts as HdrHistogram's V2 payload,
// their sum and the clamp count. It is a few hundred bytes for a report's
// histogram where the counts array is ~173 KB, and it merges into a
// Histogram at the cost of its populated buckets (see FromSparse).
//
// Counts is exactly the payload of the V2 encoding (what Encode compresses
// after its 40-byte header): every count in index order as a ZigZag LEB128
// varint (seven bits per byte, all eight in a ninth byte), a run of n >= 2
// zero counts as the single value -n, up to the last non-zero count (a
// single 0 for an empty histogram). Any V2 reader takes it behind the
// standard header.
//
// A Sparse is a plain value; FromSparse keeps its Counts without copying.
type Sparse struct {
	// Config is the geometry the counts are indexed by.
	Config Config
	// Counts is the V2 payload of the counts.
	Counts []byte
	// Total is the sum of the counts (Histogram.Count).
	Total int64
	// Clamped is how many of the values were clamped (Histogram.Clamped);
	// they are counted in Total too, so Clamped <= Total.
	Clamped int64
}

// Sparse returns h in sparse form; its Counts is a new slice. h is
// unchanged and a sparse h is not expanded (its payload is re-read). A full
// h costs one pass over its counts array, read in place. Sparse is safe
// for concurrent use with other readers of h.
func (h *Histogram) Sparse() Sparse {
	c := coders.Get().(*coder)
	defer coders.Put(c)
	c.raw = appendPayload(c.raw[:0], h)
	return Sparse{Config: h.cfg, Counts: append([]byte(nil), c.raw...), Total: h.total, Clamped: h.clamped}
}

// FromSparse validates s against cfg and returns it as a Histogram that
// holds only s's payload: merging it into another Histogram adds each
// populated bucket straight into the destination's counts, so a merge costs
// the buckets a report carries, not the geometry's range. Any other use
// (Summary, Record, Equal, Unwrap...) expands it to a full histogram once,
// safely under concurrent reads; Encode and Sparse read the payload without
// expanding it.
//
// It returns an error wrapping ErrConfigMismatch when s.Config is not cfg,
// and one wrapping ErrCorrupt when the payload is malformed (a truncated
// varint, an index or zero run past cfg's counts array, a sum past
// MaxInt64), when the counts do not sum to s.Total, or when s.Clamped is
// negative or above s.Total. It never panics: s may come from the network.
//
// The result keeps s.Counts without copying it: the caller must not change
// those bytes afterwards. FromSparse is safe for concurrent use.
func FromSparse(cfg Config, s Sparse) (*Histogram, error) {
	// Default is valid; Validate's float arithmetic would be a fair part
	// of a small histogram's cost.
	if cfg != Default {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("decode histogram: %w", err)
		}
	}
	if s.Config != cfg {
		return nil, fmt.Errorf("decode histogram %s as %s: %w", s.Config.Fingerprint(), cfg.Fingerprint(), ErrConfigMismatch)
	}
	g := geometryOf(cfg)
	if len(s.Counts) > g.countsLen*maxVarint {
		return nil, corrupt("payload of %d bytes is longer than %d counts can take", len(s.Counts), g.countsLen)
	}
	total, err := validate(s.Counts, g)
	if err != nil {
		return nil, err
	}
	switch {
	case total != s.Total:
		return nil, corrupt("counts sum to %d, total says %d", total, s.Total)
	case s.Clamped < 0 || s.Clamped > total:
		return nil, corrupt("clamp count %d is not within 0..%d", s.Clamped, total)
	}
	return &Histogram{cfg: cfg, g: g, total: total, clamped: s.Clamped, lazy: true, sparse: sparse{payload: s.Counts, g: g, count: total}}, nil
}

// sparse is a histogram's validated V2 payload (see Sparse.Counts).
// Immutable once built, so clones share it.
type sparse struct {
	payload []byte
	g       geometry
	count   int64 // sum of the counts
}

// buckets yields the index and count of every non-zero count of s, in
// index order. s must have been validated.
func (s *sparse) buckets() iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		idx := 0
		for pos := 0; pos < len(s.payload); {
			v, n := readZigZag(s.payload[pos:])
			pos += n
			switch {
			case v < 0:
				idx += int(-v)
				continue
			case v > 0 && !yield(idx, v):
				return
			}
			idx++
		}
	}
}

// addTo adds every count of s into counts (s's geometry), index by
// index, and their sum into *total; it returns how many values it refused
// because *total would pass math.MaxInt64 (saturating), as hdrhistogram-go's
// Merge refuses them. This is the coordinator's merge, once per populated
// bucket of every report: no value is mapped back to its index.
func (s *sparse) addTo(counts []int64, total *int64) (dropped int64) {
	// Validated (no truncated varint, every index in range): the loop only
	// decodes, with the one-byte varints of most counts and zero runs read
	// inline.
	p := s.payload
	t := *total
	idx := 0
	for pos := 0; pos < len(p); {
		var v int64
		if b := p[pos]; b < 0x80 {
			v = int64(b>>1) ^ -int64(b&1)
			pos++
		} else {
			var n int
			v, n = readZigZagLong(p[pos:])
			pos += n
		}
		if v < 0 {
			idx += int(-v)
			continue
		}
		if v > 0 {
			if v > math.MaxInt64-t {
				dropped = addDropped(dropped, v)
			} else {
				counts[idx] += v
				t += v
			}
		}
		idx++
	}
	*total = t
	return dropped
}

// payloadWriter writes a V2 payload from the non-zero counts given in
// index order.
type payloadWriter struct {
	b    []byte
	next int // the index the next varint stands for
}

// add appends count c > 0 at index idx > every index added before.
func (w *payloadWriter) add(idx int, c int64) {
	switch gap := idx - w.next; {
	case gap == 1:
		w.b = appendZigZag(w.b, 0)
	case gap > 1:
		w.b = appendZigZag(w.b, -int64(gap))
	}
	w.b = appendZigZag(w.b, c)
	w.next = idx + 1
}

// finish returns the payload: an empty histogram's is one zero count.
func (w *payloadWriter) finish() []byte {
	if w.next == 0 {
		w.b = appendZigZag(w.b, 0)
	}
	return w.b
}

// appendPayload appends h's counts as a V2 payload to b, in the canonical
// form hdrhistogram-go writes. A sparse h is re-read from its payload; a
// full one is read from its counts array in place.
func appendPayload(b []byte, h *Histogram) []byte {
	if s := h.compact(); s != nil {
		w := payloadWriter{b: b}
		for idx, n := range s.buckets() {
			w.add(idx, n)
		}
		return w.finish()
	}
	return appendCounts(b, h.full())
}

// DecodeSparse parses and validates b as Decode does, with the same errors,
// but keeps only the encoded buckets (a copy of the inflated payload, a few
// hundred bytes for a typical report) instead of a full counts array, as
// FromSparse does. The clamp count of the result is 0 (see SetClamped).
// DecodeSparse is safe for concurrent use.
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
	return &Histogram{cfg: cfg, g: s.g, total: s.count, lazy: true, sparse: s}, nil
}

// IsSparse reports whether h holds only an encoded payload (FromSparse,
// DecodeSparse) and has not been expanded: a Clone of it is then a few
// hundred bytes that share the immutable payload, and merging it costs
// its populated buckets. IsSparse is a read.
func (h *Histogram) IsSparse() bool { return h.compact() != nil }
