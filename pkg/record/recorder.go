package record

import (
	"cmp"
	"slices"
	"sync"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// Recorder collects samples into per-window data and hands it out in
// intervals. It is safe for concurrent use by any number of goroutines:
// Record, Update and Drain may all run at once, and every sample and update
// lands in exactly one Drain.
//
// One mutex guards the current set of windows. A Record holds it for one
// Window.Add, a request's whole ITL slice included, which costs a few
// nanoseconds per value; Drain swaps the set for an empty one under the lock
// and does the rest outside it. A second mutex serialises the creation of
// windows, which allocates outside the first.
type Recorder struct {
	cfg hdr.Config

	// create is held while a window is allocated, so that goroutines that
	// all find a window missing allocate it once, not once each. Lock
	// order: create before mu.
	create sync.Mutex

	mu      sync.Mutex
	windows map[uint32]*Window // guarded by mu; swapped out by Drain
	good    func(*Sample) bool // guarded by mu; nil: goodput not counted
}

// SetGood makes Record count in Counters.Good every sample for which good
// returns true (vLLM's goodput objectives); nil stops counting. good is
// called under the Recorder's lock and must be quick. Safe for concurrent
// use.
func (r *Recorder) SetGood(good func(*Sample) bool) {
	r.mu.Lock()
	r.good = good
	r.mu.Unlock()
}

// NewRecorder returns an empty Recorder whose windows use cfg. It panics if
// cfg is invalid (see hdr.Config.Validate); hdr.Default is valid.
func NewRecorder(cfg hdr.Config) *Recorder {
	if err := cfg.Validate(); err != nil {
		panic("record: " + err.Error())
	}
	return &Recorder{cfg: cfg, windows: make(map[uint32]*Window)}
}

// Config returns the histogram configuration of the Recorder's windows.
func (r *Recorder) Config() hdr.Config { return r.cfg }

// Record adds s to the window s.Window (see Window.Add). It keeps no
// reference to s. Safe for concurrent use.
func (r *Recorder) Record(s *Sample) {
	if s == nil || s.Result == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.window(s.Window)
	w.Add(s)
	if r.good != nil && r.good(s) {
		w.Counters.Good++
	}
}

// Update calls fn with the counters of window under the Recorder's lock, for
// counts that are not samples: conversations started or completed,
// fallbacks, late sends, dropped sends. fn must be quick and must not call the
// Recorder. Safe for concurrent use.
func (r *Recorder) Update(window uint32, fn func(*Counters)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.window(window).Counters)
}

// window returns the current window id, creating it. It is called with r.mu
// held and may release and retake it: a window allocates every histogram
// (about 1.4 MB with hdr.Default), which must not stall every other
// recording goroutine. The allocation happens under r.create instead, so
// that the goroutines that find the window missing together (every session
// at a window edge) allocate it once between them.
func (r *Recorder) window(id uint32) *Window {
	if w := r.windows[id]; w != nil {
		return w
	}
	r.mu.Unlock()
	r.create.Lock()
	defer r.create.Unlock()
	r.mu.Lock()
	// Another goroutine may have created the window while this one waited
	// for r.create.
	if w := r.windows[id]; w != nil {
		return w
	}
	r.mu.Unlock()
	fresh := NewWindow(id, r.cfg)
	r.mu.Lock()
	// Only a holder of r.create adds windows, so the window is still
	// missing; a Drain may have swapped the map meanwhile, and the window
	// belongs to the current one.
	r.windows[id] = fresh
	return fresh
}

// Peek returns a copy of window id as recorded since the previous Drain,
// or nil when it has none. It copies every histogram under the Recorder's
// lock, so it stalls recording for that long: call it seconds apart, not
// per sample. Safe for concurrent use.
func (r *Recorder) Peek(id uint32) *Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.windows[id]; w != nil {
		return w.Clone()
	}
	return nil
}

// Drain returns the data recorded since the previous Drain, one Window per
// window id that received a sample or an Update, sorted by ID, and starts a
// new interval. The windows belong to the caller. Safe for concurrent use.
func (r *Recorder) Drain() []*Window {
	r.mu.Lock()
	m := r.windows
	r.windows = make(map[uint32]*Window, len(m))
	r.mu.Unlock()

	out := make([]*Window, 0, len(m))
	for _, w := range m {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *Window) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
