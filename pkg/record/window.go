package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// MaxTurnIndex is the highest turn index kept separately in Window.Turns;
// later turns fold into it, so Turns[MaxTurnIndex] means "turn 16 or later".
const MaxTurnIndex = 16

// TurnIndex returns the Window.Turns key of 1-based turn: turns below 1 count
// as turn 1, turns above MaxTurnIndex as MaxTurnIndex.
func TurnIndex(turn int) int {
	return min(max(turn, 1), MaxTurnIndex)
}

// TurnStats are the statistics of the successful requests of one turn index,
// for cache hit rate by conversation depth. A nil TTFT (a received report's
// turn without samples) reads as empty. Not safe for concurrent mutation.
type TurnStats struct {
	TTFT              *hdr.Histogram
	Requests          int64
	PromptTokens      int64
	CachedTokens      int64
	RequestsWithCache int64
}

// HitRate returns CachedTokens / PromptTokens, or 0 without prompt tokens.
func (t *TurnStats) HitRate() float64 { return ratio(t.CachedTokens, t.PromptTokens) }

// Window is the data of one coordinator window: a histogram per Metric, per
// turn statistics and counters. Windows of one Config merge losslessly and
// associatively, across goroutines, agents and runs.
//
// A Window is not safe for concurrent use: Add, Merge and reads must be
// serialized by the caller. Windows returned by Recorder.Drain belong to the
// caller.
type Window struct {
	// ID is the coordinator's window id.
	ID uint32
	// Config is the configuration of every histogram of the window.
	Config hdr.Config
	// Hist holds one histogram per Metric, all of Config. NewWindow fills
	// every entry; a nil entry (e.g. in a hand-built Window) reads as empty.
	// Clamped counts live in the histograms (see Window.Clamped).
	Hist [NumMetrics]*hdr.Histogram
	// Turns maps a turn index (1..MaxTurnIndex, see TurnIndex) to its stats;
	// a turn appears once a successful request of that turn is added.
	Turns map[int]*TurnStats
	// Counters are the window's totals.
	Counters Counters
	// FirstSend is the earliest Result.Start and LastEnd the latest
	// Result.Start+E2E over the window's samples (wall clock); zero without
	// samples.
	FirstSend, LastEnd time.Time
	// Errors holds the window's distinct failures (at most MaxErrorKinds
	// and OtherErrors); read them with TopErrors.
	Errors map[errorKey]*ErrorStat
	// Workers counts the successful requests and prompt tokens of each
	// worker the responses named (client.Result.Worker; at most MaxWorkers
	// and OtherWorker); nil when no response named one.
	Workers map[string]*WorkerStat
}

// NewWindow returns an empty window with every histogram allocated. It
// panics if cfg is invalid (see hdr.Config.Validate); hdr.Default is valid.
func NewWindow(id uint32, cfg hdr.Config) *Window {
	w := &Window{ID: id, Config: cfg, Turns: make(map[int]*TurnStats)}
	for m := range w.Hist {
		w.Hist[m] = cfg.New()
	}
	return w
}

// hist returns w's histogram of m, allocating it if a hand-built window left
// it nil.
func (w *Window) hist(m Metric) *hdr.Histogram {
	if w.Hist[m] == nil {
		w.Hist[m] = w.Config.New()
	}
	return w.Hist[m]
}

// turn returns the stats of turn index i, creating them.
func (w *Window) turn(i int) *TurnStats {
	t := w.Turns[i]
	if t == nil {
		if w.Turns == nil {
			w.Turns = make(map[int]*TurnStats)
		}
		t = &TurnStats{TTFT: w.Config.New()}
		w.Turns[i] = t
	}
	return t
}

// Add records one sample into w; a nil sample or one without a Result is
// ignored (the load engine never produces them). Add is not safe for
// concurrent use.
//
// Every sample widens FirstSend/LastEnd, records its Lag (schedule lag is a
// property of the schedule, whatever the outcome) and counts Restarted.
//
// A successful sample adds TTFT and TTFTIntended (only when content arrived,
// TTFT > 0), TTFB, every ITL gap, TPOT (when > 0: at least two tokens), E2E
// and E2EIntended; its tokens and cache hits to the Counters and to its turn's
// TurnStats, UsageMissing when the server sent no usage, its finish reason
// and the header that named its worker.
//
// A failed sample counts Failed and FailedByClass (ClassUnknown when its
// class is empty) and adds nothing else: no latencies and no tokens, even if
// usage arrived before the failure, so throughput and hit rates are over
// successful requests only, as the latencies are.
func (w *Window) Add(s *Sample) {
	if s == nil || s.Result == nil {
		return
	}
	r := s.Result
	w.widen(r.Start, r.Start.Add(r.E2E))
	if s.Restarted {
		w.Counters.Restarted++
	}
	lag := s.Lag()
	w.hist(Lag).Record(lag)

	if !r.OK() {
		class := r.Class
		if class == client.ClassOK {
			class = ClassUnknown
		}
		if w.Counters.FailedByClass == nil {
			w.Counters.FailedByClass = make(map[client.Class]int64, len(client.Classes))
		}
		w.Counters.FailedByClass[class]++
		w.addError(class, errorText(r), r.Start)
		w.Counters.Failed++
		return
	}

	ts := w.turn(TurnIndex(s.Turn))
	if r.TTFT > 0 {
		w.hist(TTFT).Record(r.TTFT)
		w.hist(TTFTIntended).Record(lag + r.TTFT)
		ts.TTFT.Record(r.TTFT)
	}
	w.hist(TTFB).Record(r.TTFB)
	w.hist(ITL).RecordDurations(r.ITL)
	if tpot := r.TPOT(); tpot > 0 {
		w.hist(TPOT).Record(tpot)
	}
	w.hist(E2E).Record(r.E2E)
	w.hist(E2EIntended).Record(lag + r.E2E)

	c := &w.Counters
	c.Requests++
	c.InputTokens += int64(r.PromptTokens)
	c.OutputTokens += int64(r.OutputTokens)
	c.CachedTokens += int64(r.CachedTokens)
	if !r.UsageReported {
		c.UsageMissing++
	}
	ts.Requests++
	ts.PromptTokens += int64(r.PromptTokens)
	ts.CachedTokens += int64(r.CachedTokens)
	if r.CachedTokens > 0 {
		c.RequestsWithCache++
		ts.RequestsWithCache++
	}
	w.addWorker(r.Worker, int64(r.PromptTokens))
	if c.FinishReasons == nil {
		c.FinishReasons = make(map[string]int64, 4)
	}
	c.FinishReasons[FinishReasonOf(r.FinishReason)]++
	if r.WorkerHeader != "" {
		if c.WorkerHeaders == nil {
			c.WorkerHeaders = make(map[string]int64, 1)
		}
		c.WorkerHeaders[r.WorkerHeader]++
	}
}

// widen extends FirstSend/LastEnd to cover [start, end]; zero times are
// ignored.
func (w *Window) widen(start, end time.Time) {
	if !start.IsZero() && (w.FirstSend.IsZero() || start.Before(w.FirstSend)) {
		w.FirstSend = start
	}
	if !end.IsZero() && end.After(w.LastEnd) {
		w.LastEnd = end
	}
}

// Merge adds all of o (histograms, clamp counts, turns, counters and time
// span) into w; o is unchanged and w keeps its ID, so windows of different
// IDs can be merged into a run total. Merge is associative and commutative.
// It returns an error wrapping hdr.ErrConfigMismatch, changing nothing, when
// the configs differ, and an error wrapping hdr.ErrDropped if a histogram
// dropped values (everything else is still merged). A nil o is a no-op.
// Not safe for concurrent use with any other use of w or mutation of o.
func (w *Window) Merge(o *Window) error {
	if o == nil {
		return nil
	}
	if o == w {
		o = o.Clone()
	}
	if err := w.MergeCounts(o); err != nil {
		return err
	}
	return w.MergeHistograms([]*Window{o})
}

// MergeCounts adds everything of o but its histograms into w: the
// counters, the turns' counts (creating their entries), the time span, the
// errors and the workers. With MergeHistograms it is Merge in two steps,
// for a caller that merges many windows' histograms at once. It returns an
// error wrapping hdr.ErrConfigMismatch, changing nothing, when the configs
// differ. A nil o is a no-op. Not safe for concurrent use with any other
// use of w or mutation of o; o must not be w.
func (w *Window) MergeCounts(o *Window) error {
	if o == nil {
		return nil
	}
	if w.Config != o.Config {
		return fmt.Errorf("merge window %d (%s) into %d (%s): %w",
			o.ID, o.Config.Fingerprint(), w.ID, w.Config.Fingerprint(), hdr.ErrConfigMismatch)
	}
	for i, ot := range o.Turns {
		t := w.turn(TurnIndex(i))
		t.Requests += ot.Requests
		t.PromptTokens += ot.PromptTokens
		t.CachedTokens += ot.CachedTokens
		t.RequestsWithCache += ot.RequestsWithCache
	}
	w.Counters.Add(&o.Counters)
	w.widen(o.FirstSend, o.LastEnd)
	for _, e := range o.Errors {
		w.mergeError(*e)
	}
	for name, s := range o.Workers {
		w.mergeWorker(name, *s)
	}
	return nil
}

// MergeHistograms adds the histograms of every window of os (the metrics'
// and the turns' TTFT) into w, one metric at a time across all of os: each
// of w's histograms is merged into while it is in the CPU's caches,
// instead of all of them in turn for every window. Every window of os
// must have w's Config (as MergeCounts checks); nil ones are skipped. It
// returns an error wrapping hdr.ErrDropped if a histogram dropped values
// (everything else is still merged). Not safe for concurrent use with any
// other use of w or mutation of os; no o may be w.
func (w *Window) MergeHistograms(os []*Window) error {
	var errs []error
	for m := range NumMetrics {
		var dst *hdr.Histogram
		for _, o := range os {
			if o == nil || o.Hist[m] == nil {
				continue
			}
			if dst == nil {
				dst = w.hist(m)
			}
			if err := dst.Merge(o.Hist[m]); err != nil {
				errs = append(errs, fmt.Errorf("merge window %d %s: %w", o.ID, m, err))
			}
		}
	}
	for _, o := range os {
		if o == nil {
			continue
		}
		for i, ot := range o.Turns {
			if ot.TTFT != nil {
				if err := w.turn(TurnIndex(i)).TTFT.Merge(ot.TTFT); err != nil {
					errs = append(errs, fmt.Errorf("merge window %d turn %d ttft: %w", o.ID, i, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Clone returns a deep copy of w. Not safe for concurrent use with mutation
// of w.
func (w *Window) Clone() *Window {
	c := &Window{
		ID:        w.ID,
		Config:    w.Config,
		Turns:     make(map[int]*TurnStats, len(w.Turns)),
		Counters:  w.Counters.Clone(),
		FirstSend: w.FirstSend,
		LastEnd:   w.LastEnd,
	}
	for m, h := range w.Hist {
		if h != nil {
			c.Hist[m] = h.Clone()
		}
	}
	if w.Errors != nil {
		c.Errors = make(map[errorKey]*ErrorStat, len(w.Errors))
		for k, e := range w.Errors {
			ce := *e
			c.Errors[k] = &ce
		}
	}
	for i, t := range w.Turns {
		ct := *t
		if t.TTFT != nil {
			ct.TTFT = t.TTFT.Clone()
		}
		c.Turns[i] = &ct
	}
	for name, s := range w.Workers {
		c.mergeWorker(name, *s)
	}
	return c
}

// Equal reports whether w and o hold the same data: ID, config, histograms
// (counts and clamp counts), turns, counters and time span. A nil histogram
// equals an empty one.
func (w *Window) Equal(o *Window) bool {
	if w.ID != o.ID || w.Config != o.Config || !w.FirstSend.Equal(o.FirstSend) || !w.LastEnd.Equal(o.LastEnd) ||
		!w.Counters.Equal(&o.Counters) || len(w.Turns) != len(o.Turns) {
		return false
	}
	for m := range w.Hist {
		if !histEqual(w.Config, w.Hist[m], o.Hist[m]) {
			return false
		}
	}
	for i, t := range w.Turns {
		ot := o.Turns[i]
		if ot == nil || t.Requests != ot.Requests || t.PromptTokens != ot.PromptTokens ||
			t.CachedTokens != ot.CachedTokens || t.RequestsWithCache != ot.RequestsWithCache ||
			!histEqual(w.Config, t.TTFT, ot.TTFT) {
			return false
		}
	}
	return true
}

func histEqual(cfg hdr.Config, a, b *hdr.Histogram) bool {
	if a == nil && b == nil {
		return true
	}
	if a == nil {
		a = cfg.New()
	}
	if b == nil {
		b = cfg.New()
	}
	return a.Equal(b)
}

// Summary returns the summary of metric m's histogram (zero when empty).
func (w *Window) Summary(m Metric) hdr.Summary {
	if w.Hist[m] == nil {
		return hdr.Summary{}
	}
	return w.Hist[m].Summary()
}

// Clamped returns, per metric, how many recorded values fell outside the
// histogram range and were recorded at its bound (see hdr.Histogram.Clamped).
// Turn TTFT histograms keep their own (TurnStats.TTFT.Clamped()).
func (w *Window) Clamped() [NumMetrics]int64 {
	var c [NumMetrics]int64
	for m, h := range w.Hist {
		if h != nil {
			c[m] = h.Clamped()
		}
	}
	return c
}

// HitRate returns the token-weighted KV-cache hit rate, sum(cached tokens) /
// sum(prompt tokens) over successful requests, in 0..1; 0 without prompt
// tokens.
func (w *Window) HitRate() float64 {
	return ratio(w.Counters.CachedTokens, w.Counters.InputTokens)
}

// HitRequestShare returns the share of successful requests that had any
// cached tokens, in 0..1; 0 without requests.
func (w *Window) HitRequestShare() float64 {
	return ratio(w.Counters.RequestsWithCache, w.Counters.Requests)
}

// TurnHitRate returns the token-weighted hit rate of turn (folded by
// TurnIndex); 0 when that turn has no prompt tokens.
func (w *Window) TurnHitRate(turn int) float64 {
	t := w.Turns[TurnIndex(turn)]
	if t == nil {
		return 0
	}
	return t.HitRate()
}

func ratio(num, den int64) float64 {
	if den <= 0 {
		return 0
	}
	return float64(num) / float64(den)
}
