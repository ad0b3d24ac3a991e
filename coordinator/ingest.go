package coordinator

import (
	"errors"
	"fmt"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// ingest merges reports' histograms into a window's data. It holds the
// scratch slices of one merge, so that a report costs no allocation of
// its own here; it is owned by the run's goroutine with its window.
type ingest struct {
	// keep asks for the report's checked histograms in rep.Window (for
	// the live view, OnReport and late reports' metrics); without it
	// the merge builds none.
	keep    bool
	dsts    []*hdr.Histogram
	srcs    []hdr.Sparse
	out     []*hdr.Histogram
	created []int // turn indices the merge added to the destination
}

// merge checks and adds every histogram of rep into dst, in one walk of
// each (hdr.MergeSparse), all or nothing. A malformed histogram, or one of
// another geometry, refuses the report: dst is left exactly as it was and
// the error, which wraps an *hdr.SparseError (see refused), names the
// report and the histogram as the gRPC edge used to. Otherwise, with
// in.keep, rep.Window gets its checked histograms (for the live view, a
// late report's Prometheus metrics and OnReport), and the error is nil
// or, when a total would pass math.MaxInt64, an *hdr.DroppedError of what
// was not added.
func (in *ingest) merge(dst *record.Window, rep report) error {
	if len(rep.Hists) == 0 {
		return nil
	}
	in.dsts, in.srcs, in.created = in.dsts[:0], in.srcs[:0], in.created[:0]
	for _, h := range rep.Hists {
		var d *hdr.Histogram
		if h.isTurn {
			i := record.TurnIndex(h.turn)
			t := dst.Turns[i]
			if t == nil {
				if dst.Turns == nil {
					dst.Turns = make(map[int]*record.TurnStats)
				}
				t = &record.TurnStats{TTFT: dst.Config.New()}
				dst.Turns[i] = t
				in.created = append(in.created, i)
			}
			d = t.TTFT
		} else {
			if dst.Hist[h.metric] == nil {
				dst.Hist[h.metric] = dst.Config.New() // empty: reads as nil
			}
			d = dst.Hist[h.metric]
		}
		in.dsts = append(in.dsts, d)
		in.srcs = append(in.srcs, h.sparse)
	}
	var out []*hdr.Histogram
	if in.keep {
		if cap(in.out) < len(in.srcs) {
			in.out = make([]*hdr.Histogram, len(in.srcs))
		}
		out = in.out[:len(in.srcs)]
	}
	defer func() {
		// The scratch keeps no report's histograms alive.
		clear(out)
		clear(in.srcs)
	}()
	err := hdr.MergeSparse(in.dsts, in.srcs, out)
	if se := (*hdr.SparseError)(nil); errors.As(err, &se) {
		for _, i := range in.created {
			delete(dst.Turns, i)
		}
		return fmt.Errorf("decode report %d %s: %w", rep.Seq, rep.Hists[se.Index].name(), se)
	}
	if out == nil {
		return err
	}
	for i, h := range rep.Hists {
		if h.isTurn {
			rep.Window.Turns[record.TurnIndex(h.turn)].TTFT = out[i]
		} else {
			rep.Window.Hist[h.metric] = out[i]
		}
	}
	return err
}

// refused reports whether err is a report's refusal by ingest.merge.
func refused(err error) bool {
	if err == nil {
		return false // without the target escaping to the heap, twice a report
	}
	var se *hdr.SparseError
	return errors.As(err, &se)
}
