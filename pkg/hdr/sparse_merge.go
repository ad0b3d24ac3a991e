package hdr

import (
	"errors"
	"fmt"
	"math"
)

// SparseError is MergeSparse's refusal of one of its sources: Index is
// the source's position and Err is what FromSparse says of it (wrapping
// ErrConfigMismatch or ErrCorrupt). Read it with errors.As.
type SparseError struct {
	Index int
	Err   error
}

// Error implements error.
func (e *SparseError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal, for errors.Is.
func (e *SparseError) Unwrap() error { return e.Err }

// MergeSparse adds every srcs[i] into dsts[i], all or nothing, checking
// each source in the same pass over its payload that adds it: a report's
// histograms cost one walk each, where FromSparse and then Merge walk each
// twice.
//
// A source is refused exactly when FromSparse(dsts[i].Config(), srcs[i])
// fails, with that error inside a *SparseError naming the first refused
// source. Then no destination changes: what was added before the fault was
// found is taken out again, which only a refused report pays for.
//
// On success it sets out[i] to srcs[i] as FromSparse returns it (sharing
// its Counts, which the caller must not change afterwards), or to nil when
// the source is empty, for whoever reads the sources afterwards; a nil out
// asks for none of them (a histogram each the merge does not allocate). Counts
// that would take a destination's total past math.MaxInt64 are then not
// added, as Merge drops them, and the error is a *DroppedError: everything
// else is merged.
//
// dsts, srcs and a non-nil out have the same length; a destination may appear more
// than once. The destinations are mutated as Merge mutates them (see
// Histogram for the locking contract); MergeSparse is otherwise safe for
// concurrent use.
func MergeSparse(dsts []*Histogram, srcs []Sparse, out []*Histogram) error {
	if len(dsts) != len(srcs) || (out != nil && len(out) != len(srcs)) {
		panic("hdr: MergeSparse of slices of different lengths")
	}
	// The one-pass merge cannot overflow a destination's total when the
	// claimed totals all fit: each source's walk stops once its counts
	// pass its claimed total. Otherwise (never in practice) the sources
	// are validated first and merged with Merge's dropping.
	var claimed int64
	for _, s := range srcs {
		if s.Total > 0 {
			if s.Total > math.MaxInt64-claimed {
				return mergeSparseSlow(dsts, srcs, out)
			}
			claimed += s.Total
		}
	}
	for _, d := range dsts {
		if d.total > math.MaxInt64-claimed {
			return mergeSparseSlow(dsts, srcs, out)
		}
	}
	for i, s := range srcs {
		d := dsts[i]
		sum, stop, ok := d.addChecked(s)
		if ok {
			// A sound source's counts sum to its Total (addChecked).
			d.total += sum
			d.clamped += s.Clamped
			d.gen++
			if out != nil {
				out[i] = nil
				if sum > 0 {
					out[i] = &Histogram{cfg: d.cfg, g: d.g, total: sum, clamped: s.Clamped, lazy: true,
						sparse: sparse{payload: s.Counts, g: d.g, count: sum}}
				}
			}
			continue
		}
		// Take out what this source added before its fault, then the
		// sources merged before it, last first.
		subPayload(d.full(), s.Counts[:stop])
		for j := i - 1; j >= 0; j-- {
			dj := dsts[j]
			subPayload(dj.full(), srcs[j].Counts)
			dj.total -= srcs[j].Total
			dj.clamped -= srcs[j].Clamped
			dj.gen++
		}
		clear(out)
		return &SparseError{Index: i, Err: refusal(d.cfg, s)}
	}
	return nil
}

// refusal returns FromSparse's error for s, which addChecked refused.
func refusal(cfg Config, s Sparse) error {
	if _, err := FromSparse(cfg, s); err != nil {
		return err
	}
	// addChecked and FromSparse refuse the same sources (FuzzMergeSparseAll).
	return corrupt("refused by the merge, accepted by FromSparse")
}

// addChecked adds s's counts into h's counts while checking s as
// FromSparse does, up to the first fault: it returns the sum added, the
// byte of the payload it stopped at (where the faulty varint starts, or
// the end) and whether s is sound. h's total, clamp count and generation
// are the caller's to update. The counts sum to at most s.Total, so
// nothing is dropped when h's total plus s.Total fits in an int64.
func (h *Histogram) addChecked(s Sparse) (sum int64, stop int, ok bool) {
	if s.Config != h.cfg || s.Total < 0 || s.Clamped < 0 || s.Clamped > s.Total ||
		len(s.Counts) > h.g.countsLen*maxVarint {
		return 0, 0, false
	}
	counts := h.full()
	n := len(counts)
	p := s.Counts
	limit := s.Total
	idx := 0
	pos := 0
	for pos < len(p) {
		start := pos
		// One-byte varints (most counts and zero runs) are read inline.
		var v int64
		if b := p[pos]; b < 0x80 {
			v = int64(b>>1) ^ -int64(b&1)
			pos++
		} else {
			var k int
			if v, k = readZigZagLong(p[pos:]); k == 0 {
				return sum, start, false // truncated
			}
			pos += k
		}
		if v < 0 {
			if v == math.MinInt64 || -v > int64(n-idx) {
				return sum, start, false // a zero run past the counts
			}
			idx += int(-v)
			continue
		}
		if idx >= n || v > limit-sum {
			// An index past the counts, or counts past the total (which
			// also keeps the sum from overflowing).
			return sum, start, false
		}
		counts[idx] += v
		sum += v
		idx++
	}
	return sum, pos, sum == s.Total
}

// subPayload subtracts the counts of p, a payload addChecked accepted up
// to its end, from counts.
func subPayload(counts []int64, p []byte) {
	idx := 0
	for pos := 0; pos < len(p); {
		v, n := readZigZag(p[pos:])
		pos += n
		if v < 0 {
			idx += int(-v)
			continue
		}
		counts[idx] -= v
		idx++
	}
}

// mergeSparseSlow is MergeSparse when a destination's total could pass
// math.MaxInt64: every source is validated, then each is merged with
// Merge's dropping.
func mergeSparseSlow(dsts []*Histogram, srcs []Sparse, out []*Histogram) error {
	if out == nil {
		out = make([]*Histogram, len(srcs))
	}
	for i, s := range srcs {
		h, err := FromSparse(dsts[i].cfg, s)
		if err != nil {
			clear(out)
			return &SparseError{Index: i, Err: err}
		}
		out[i] = h
	}
	var dropped int64
	for i, h := range out {
		if err := dsts[i].Merge(h); err != nil {
			var d *DroppedError
			if !errors.As(err, &d) {
				return fmt.Errorf("merge sparse histogram %d: %w", i, err)
			}
			dropped = addDropped(dropped, d.Count)
		}
		if h.Count() == 0 {
			out[i] = nil
		}
	}
	if dropped > 0 {
		return &DroppedError{Count: dropped}
	}
	return nil
}
