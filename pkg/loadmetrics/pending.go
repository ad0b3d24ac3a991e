package loadmetrics

import "github.com/fleetbench/fleetbench/pkg/hdr"

// maxQueued is how many sparse histograms a series queues before it
// folds them (see queue): a bound on the memory they hold when nobody
// scrapes, 1,024 reports of a few hundred bytes each.
const maxQueued = 1024

// queue adds h to s. A sparse histogram (hdr.FromSparse, as the
// coordinator receives every report's) is queued as it is, a clone that
// shares its immutable payload: its buckets are converted at the next
// fold, at collection or when maxQueued are waiting, all at once through
// one accumulator. Converting each report's buckets on arrival would
// walk a table per bucket of every report, in caches the coordinator's
// window merge needs too; the fold walks each payload into an
// accumulator that stays in cache, then converts the accumulator once. A
// full histogram is converted at once (it may change after Add). v.mu is
// held.
func (v *Histogram) queue(s *series, h *hdr.Histogram) {
	if !h.IsSparse() {
		s.add(h, v.tableOf(h.Config()))
		return
	}
	s.queued = append(s.queued, h.Clone())
	if len(s.queued) >= maxQueued {
		v.fold(s)
	}
}

// fold converts s's queued histograms into its classic and native
// buckets. v.mu is held.
func (v *Histogram) fold(s *series) {
	if len(s.queued) == 0 {
		return
	}
	cfg := s.queued[0].Config()
	if v.acc == nil || v.acc.Config() != cfg {
		v.acc = cfg.New()
	}
	for i, h := range s.queued {
		if h.Config() != cfg || v.acc.Merge(h) != nil {
			// Another geometry, or the accumulator's total would pass
			// MaxInt64 (nothing of h was added): convert what it holds
			// and start again from h.
			v.flush(s)
			if h.Config() != cfg {
				cfg = h.Config()
				v.acc = cfg.New()
			}
			_ = v.acc.Merge(h) // an empty accumulator takes any valid histogram
		}
		s.queued[i] = nil
	}
	v.flush(s)
	s.queued = s.queued[:0]
}

// flush converts v's accumulator into s and empties it. v.mu is held.
func (v *Histogram) flush(s *series) {
	if v.acc.Count() == 0 {
		return
	}
	s.add(v.acc, v.tableOf(v.acc.Config()))
	v.acc.Reset()
}
