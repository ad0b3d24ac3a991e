package coordinator

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// window is one coordinator window while it is open and after it closed.
// It is owned by the run's goroutine.
type window struct {
	id         uint32
	stage      int
	kind       Kind
	level      int
	mode       string
	start, end time.Time
	cfg        hdr.Config

	data *record.Window
	// ingest merges reports' histograms into data, or into late.
	ingest       ingest
	late         *record.Window
	lateRequests int64
	// cover is keyed by member, not agent id: a restarted agent process
	// (same id, new incarnation) is a new member with its own coverage.
	cover map[*member]*coverage

	// unpublished: reports were merged into data since its latency
	// histograms last went to the load metrics (metrics.publish).
	unpublished bool

	closed   bool
	closedBy string
	closedAt time.Time
	degraded bool
	rerun    bool
}

// coverage tracks one agent's part in a window.
type coverage struct {
	id          string
	incarnation uint64
	index       int
	from        time.Time
	lostAt      time.Time
	lost        bool
	reports     int
	rejected    int
	requests    int64
	// earlier and gap carry the stints before a loss that the same
	// process came back from (a cut connection): the seconds it ran and
	// the seconds it was away.
	earlier, gap time.Duration
}

func newWindow(id uint32, stage int, kind Kind, start time.Time, cfg hdr.Config) *window {
	return &window{
		id: id, stage: stage, kind: kind, start: start, cfg: cfg,
		data:  record.NewWindow(id, cfg),
		cover: make(map[*member]*coverage),
	}
}

// addMember records that m runs load in the window from t on.
func (w *window) addMember(m *member, t time.Time) {
	if t.Before(w.start) {
		t = w.start
	}
	c, ok := w.cover[m]
	switch {
	case ok && !c.lost:
		return
	case ok:
		// The same process is back after a loss: its reports and seconds
		// so far stay, the time it was away is lost time.
		to := later(c.lostAt, later(c.from, w.start))
		c.earlier += to.Sub(later(c.from, w.start))
		c.gap += max(t.Sub(to), 0)
		c.from, c.lost, c.lostAt = t, false, time.Time{}
		return
	}
	w.cover[m] = &coverage{id: m.id, incarnation: m.incarnation, index: m.index, from: t}
}

// lose marks m lost during the window; it reports whether m contributed.
func (w *window) lose(m *member, now time.Time) bool {
	c, ok := w.cover[m]
	if !ok || c.lost {
		return false
	}
	c.lost, c.lostAt = true, m.lostAt
	w.degraded = true
	return true
}

// apply merges one report of agent m. Reports after close are kept apart
// as late samples: counted and written, never dropped. A report whose
// histograms ingest refuses changes nothing and counts nothing: the error
// says why (see refused), and the caller rejects it. Values a histogram
// dropped (only on a total count past int64) degrade the window, and the
// error says how many; the rest of the report is merged.
func (w *window) apply(m *member, rep report, out *writer) error {
	dst := w.data
	if w.closed {
		if w.late == nil {
			w.late = record.NewWindow(w.id, w.cfg)
		}
		dst = w.late
	}
	if dst.Config != rep.Window.Config {
		return dst.MergeCounts(rep.Window) // another geometry: nothing merged
	}
	herr := w.ingest.merge(dst, rep)
	if refused(herr) {
		return herr
	}
	if herr != nil {
		w.degraded = true
	}
	if c, ok := w.cover[m]; ok {
		c.reports++
		c.requests += rep.Window.Counters.Requests + rep.Window.Counters.Failed
	} else {
		// A report of an agent that joined after the window opened.
		w.cover[m] = &coverage{id: m.id, incarnation: m.incarnation, index: m.index, from: w.end,
			reports: 1, requests: rep.Window.Counters.Requests + rep.Window.Counters.Failed}
	}
	if err := dst.MergeCounts(rep.Window); err != nil {
		return err // checked above: not reached
	}
	if !w.closed {
		return herr
	}
	w.lateRequests += rep.Window.Counters.Requests + rep.Window.Counters.Failed
	if out != nil {
		if err := out.write(w); err != nil {
			return errors.Join(herr, err)
		}
	}
	return herr
}

// merged returns the window's data with every applied report merged.
func (w *window) merged() *record.Window { return w.data }

// reject records that a report of m for the window was refused: the
// window misses its data.
func (w *window) reject(m *member) {
	c, ok := w.cover[m]
	if !ok {
		c = &coverage{id: m.id, incarnation: m.incarnation, index: m.index, from: w.end}
		w.cover[m] = c
	}
	c.rejected++
	w.degraded = true
}

// watermarksPassed reports whether every live contributing agent has
// finished every turn of the window. Lost agents do not hold a window open.
func (w *window) watermarksPassed() bool {
	for m, c := range w.cover {
		if c.lost || m.lost || m.finished {
			continue // a finished agent sends no turn in any later window
		}
		if !m.hasWM || m.wm < w.id {
			return false
		}
	}
	return true
}

func (w *window) close(by string, now time.Time) {
	w.closed, w.closedBy, w.closedAt = true, by, now
}

// result snapshots the window for the caller.
func (w *window) result() *WindowResult {
	res := &WindowResult{
		ID: w.id, Stage: w.stage, Kind: w.kind, Level: w.level, Mode: w.mode,
		Start: w.start, End: w.end, Data: w.merged().Clone(), LateRequests: w.lateRequests,
		Degraded: w.degraded, Rerun: w.rerun, ClosedBy: w.closedBy,
	}
	if w.late != nil {
		res.Late = w.late.Clone()
	}
	for _, c := range w.cover {
		res.Coverage = append(res.Coverage, c.result(w.start, w.end))
	}
	slices.SortFunc(res.Coverage, func(a, b Coverage) int {
		return cmp.Or(strings.Compare(a.Agent, b.Agent), cmp.Compare(a.Incarnation, b.Incarnation))
	})
	return res
}

// result computes the agent-seconds one agent gave the window [start, end)
// and what its loss cost.
func (c *coverage) result(start, end time.Time) Coverage {
	from := later(c.from, start)
	to := end
	lost := c.gap.Seconds()
	if c.lost && c.lostAt.Before(end) {
		to = later(c.lostAt, from)
		lost += end.Sub(to).Seconds()
	}
	return Coverage{
		Agent: c.id, Incarnation: c.incarnation, Index: c.index, Seconds: c.earlier.Seconds() + max(to.Sub(from).Seconds(), 0),
		LostSeconds: lost, Reports: c.reports, Rejected: c.rejected, Requests: c.requests, Lost: c.lost,
	}
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
