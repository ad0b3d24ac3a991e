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
// buckets only, and stays sparse; a full histogram costs one pass over its
// counts array, read in place.
// Buckets is a read: it may run concurrently with other reads of h, never
// with a mutation.
func (h *Histogram) Buckets(fn func(Bucket)) {
	h.IndexedBuckets(func(_ int, b Bucket) { fn(b) })
}

// widthAt returns how many microseconds counts index i covers.
func (g geometry) widthAt(i int) int64 {
	bucket := max((i>>g.subHalfCountMag)-1, 0)
	return int64(1) << (uint(bucket) + g.unitMagnitude)
}

// IndexedBuckets calls fn with the counts index and the bucket of every
// non-empty bucket of h, in increasing order, as Buckets does and at its
// cost. Indices are those of h's Config (see Config.BucketAt): a caller may
// keep per-index tables of a Config to map buckets without arithmetic on
// their values.
// IndexedBuckets is a read: it may run concurrently with other reads of
// h, never with a mutation.
func (h *Histogram) IndexedBuckets(fn func(i int, b Bucket)) {
	g := h.g
	if s := h.compact(); s != nil {
		p := s.payload
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
				fn(idx, Bucket{Lowest: g.valueAt(idx), Width: g.widthAt(idx), Count: v})
			}
			idx++
		}
		return
	}
	for i, c := range h.full() {
		if c > 0 {
			fn(i, Bucket{Lowest: g.valueAt(i), Width: g.widthAt(i), Count: c})
		}
	}
}

// Buckets returns how many counts indices c's histograms have: the
// indices of IndexedBuckets are 0..Buckets()-1. c must be valid.
func (c Config) Buckets() int { return geometryOf(c).countsLen }

// BucketAt returns the bucket of counts index i of c's histograms, with a
// zero Count: index 0 is the only one whose Lowest is 0. c must be valid
// and i within 0..Buckets()-1.
func (c Config) BucketAt(i int) Bucket {
	g := geometryOf(c)
	return Bucket{Lowest: g.valueAt(i), Width: g.widthAt(i)}
}
