package loadmetrics

import "github.com/fleetbench/fleetbench/pkg/hdr"

// An open histogram is one whose counts only grow and which its owner
// keeps merging into: a coordinator window's merged data while the window
// is open. Instead of every report's buckets (each added on its own, see
// queue), the series takes the open histogram's whole state now and then
// (Histogram.SetOpen): the state replaces what the same key set before, so
// the owner pays a conversion of the merged histogram per call, not a
// decode per report. A final call folds the state into the series and
// forgets the key. A scrape between two calls reads the state of the last
// one, so it trails the owner by the time between calls.

// SetOpen makes h, as it is now, the contribution of key to the series of
// labelValues, replacing what key set before: h must only have grown since
// (counts never fall, as Prometheus counters must not). final folds it
// into the series for good and forgets key; call it once the histogram
// stops changing. A nil or empty h leaves the contribution empty (a final
// call forgets key). h is read during the call only, so it may change
// afterwards.
func (v *Histogram) SetOpen(key uint64, h *hdr.Histogram, final bool, labelValues ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setOpen(v.get(labelValues), key, h, final)
}

// setOpen is SetOpen on s, a series of v; v.mu is held.
func (v *Histogram) setOpen(s *series, key uint64, h *hdr.Histogram, final bool) {
	c := s.open[key]
	if c == nil {
		c = &series{classic: make([]uint64, len(v.bounds)+1)}
	} else {
		c.reset()
	}
	if h != nil && h.Count() > 0 {
		c.add(h, v.tableOf(h.Config()))
	}
	if final {
		s.merge(c)
		delete(s.open, key)
		return
	}
	if s.open == nil {
		s.open = make(map[uint64]*series)
	}
	s.open[key] = c
}

// reset empties a contribution, keeping its storage.
func (s *series) reset() {
	clear(s.classic)
	s.native, s.low = s.native[:0], 0
	s.zero, s.count, s.sum = 0, 0, 0
}

// merge adds o's counts into s.
func (s *series) merge(o *series) {
	s.count += o.count
	s.zero += o.zero
	s.sum += o.sum
	for i, n := range o.classic {
		s.classic[i] += n
	}
	for j, n := range o.native {
		if n > 0 {
			s.addNative(o.low+j, n)
		}
	}
}

// withOpen returns s with its open contributions added: s itself when it
// has none, else a copy. v.mu is held.
func (s *series) withOpen() *series {
	if len(s.open) == 0 {
		return s
	}
	t := &series{classic: append([]uint64(nil), s.classic...), native: append([]uint64(nil), s.native...),
		low: s.low, zero: s.zero, count: s.count, sum: s.sum, created: s.created}
	for _, c := range s.open {
		t.merge(c)
	}
	return t
}
