package hdr

// Bucket is one non-empty bucket of a Histogram. Every value recorded in
// it was in [Lowest, Lowest+Width) microseconds (a whole number of
// microseconds from Lowest to Lowest+Width-1, as recorded; the durations
// they were truncated from are below Lowest+Width).
type Bucket struct {
	Lowest, Width, Count int64
}

// Buckets calls fn with every non-empty bucket of h, in increasing order
// of value. A sparse histogram (FromSparse, DecodeSparse) that has not
// been expanded is read from its encoded buckets, at the cost of those
// buckets only, and stays sparse; a full histogram costs one copy of its
// counts array.
// Buckets is a read: it may run concurrently with other reads of h, never
// with a mutation.
func (h *Histogram) Buckets(fn func(Bucket)) {
	if s := h.compact(); s != nil {
		idx := 0
		for pos := 0; pos < len(s.payload); {
			// FromSparse or DecodeSparse validated the payload.
			v, n := readZigZag(s.payload[pos:])
			pos += n
			if v < 0 {
				idx += int(-v)
				continue
			}
			if v > 0 {
				fn(Bucket{Lowest: s.g.valueAt(idx), Width: s.g.widthAt(idx), Count: v})
			}
			idx++
		}
		return
	}
	g := geometryOf(h.cfg)
	// Export copies the counts: the one view of them hdrhistogram-go
	// offers (see Encode).
	for i, c := range h.hist().Export().Counts {
		if c > 0 {
			fn(Bucket{Lowest: g.valueAt(i), Width: g.widthAt(i), Count: c})
		}
	}
}

// widthAt returns how many microseconds counts index i covers.
func (g geometry) widthAt(i int) int64 {
	bucket := max((i>>g.subHalfCountMag)-1, 0)
	return int64(1) << (uint(bucket) + g.unitMagnitude)
}
