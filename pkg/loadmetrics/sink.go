package loadmetrics

import "github.com/fleetbench/fleetbench/pkg/record"

// Sink takes a run's load as it goes, as Load does: whole windows under
// their labels, and the stage, target and sessions in flight. Load is one;
// the live dashboard's feed (pkg/ui) is another, fed from the same calls
// so both see the same merged data. Implementations must be safe for
// concurrent use and return quickly: the coordinator calls them from its
// loop.
type Sink interface {
	Touch(lb Labels)
	Add(w *record.Window, lb Labels)
	SetStage(lb Labels, target int)
	SetTarget(target int)
	ClearStage()
	SetInFlight(n int)
}

var _ Sink = (*Load)(nil)

// Tee returns a Sink that hands every call to each of sinks in turn,
// skipping nil ones; with one non-nil sink it returns that sink, with none
// nil.
func Tee(sinks ...Sink) Sink {
	var t tee
	for _, s := range sinks {
		if s != nil {
			t = append(t, s)
		}
	}
	switch len(t) {
	case 0:
		return nil
	case 1:
		return t[0]
	}
	return t
}

type tee []Sink

func (t tee) Touch(lb Labels) {
	for _, s := range t {
		s.Touch(lb)
	}
}

func (t tee) Add(w *record.Window, lb Labels) {
	for _, s := range t {
		s.Add(w, lb)
	}
}

func (t tee) SetStage(lb Labels, target int) {
	for _, s := range t {
		s.SetStage(lb, target)
	}
}

func (t tee) SetTarget(target int) {
	for _, s := range t {
		s.SetTarget(target)
	}
}

func (t tee) ClearStage() {
	for _, s := range t {
		s.ClearStage()
	}
}

func (t tee) SetInFlight(n int) {
	for _, s := range t {
		s.SetInFlight(n)
	}
}
