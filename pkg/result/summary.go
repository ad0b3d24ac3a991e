package result

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// DefaultPercentiles is vLLM's --metric-percentiles default.
var DefaultPercentiles = []float64{99}

// DefaultBackend is the vLLM backend name of the endpoint fleetbench drives
// (streamed /v1/chat/completions).
const DefaultBackend = "openai-chat"

// CompletionsBackend is vLLM's backend name for streamed /v1/completions.
const CompletionsBackend = "openai"

// BackendFor returns vLLM's backend name for a client endpoint ("chat",
// "completions"; "" is chat).
func BackendFor(endpoint string) string {
	if endpoint == "completions" {
		return CompletionsBackend
	}
	return DefaultBackend
}

// Facts are the run's facts that a Window does not carry.
type Facts struct {
	// Duration is the length of the measurement window; every throughput is
	// divided by it. Required.
	Duration time.Duration
	// MaxConcurrency is the concurrency limit (closed-loop sessions or the
	// open-loop cap); 0 means none, printed and saved as vLLM does for an
	// unset --max-concurrency.
	MaxConcurrency int
	// RequestRate is the configured open-loop rate in requests per second;
	// 0 or +Inf means unbounded (vLLM's "inf").
	RequestRate float64
	// Burstiness is vLLM's gamma shape of arrivals; 0 means 1 (Poisson).
	Burstiness float64
	// Model is the served model name (vLLM's model_id).
	Model string
	// Tokenizer is the tokenizer's name; empty means Model, as in vLLM.
	Tokenizer string
	// Backend is vLLM's backend name; empty means DefaultBackend.
	Backend string
	// Label is vLLM's --label; empty is saved as null.
	Label string
	// SLO is vLLM's --goodput; zero means goodput was not measured. The
	// window's Counters.Good counts the requests that met every objective
	// (the Recorder's SetGood with SLO.Good).
	SLO SLO
	// AgentNotes says, one line each, which agents of a fleet failed, were
	// lost or warned while the window was measured.
	AgentNotes []string
	// WorkerHeader is the --worker-header the run asked for ("" when
	// none): a result says when no response carried it.
	WorkerHeader string
	// Server is what the serving stack's own /metrics said over the
	// measured time (pkg/servermetrics); nil when it was not scraped, and then
	// the block and result.json say nothing of it.
	Server *servermetrics.Window
	// Metadata are vLLM's --metadata KEY=VALUE pairs, saved as top-level
	// keys of result.json after num_prompts, as vLLM saves them. A key must
	// not be one of result.json's own (CheckMetadata).
	Metadata map[string]string
	// Target is the server's base URL. User info and the query are removed
	// before it is printed or saved.
	Target string
	// Workload names the conversation source (docchat, sharegpt, ...).
	Workload string
	// Version is fleetbench's version.
	Version string
	// Start and End bound the measurement window. The result's "date" is End
	// in End's location, formatted as vLLM does (20060102-150405).
	Start, End time.Time
	// Percentiles are the extra percentiles (vLLM's --metric-percentiles),
	// each in (0, 100]; nil means DefaultPercentiles.
	Percentiles []float64
	// PeakOutputTokensPerSec and PeakConcurrentRequests are vLLM's peak
	// figures, from a Peaks fed with the run's samples; 0 when not tracked.
	// The first counts tokens in one-second buckets; the second is the
	// exact most requests in flight at one instant (see Peaks).
	PeakOutputTokensPerSec float64
	PeakConcurrentRequests int
	// Interrupted marks a run cut short (by a signal) before its planned
	// end: WriteJSON adds "interrupted": true as the last key and
	// WriteBlock says so in the additions. False writes nothing.
	Interrupted bool
	// Stopped, when set, says why the run was stopped before its planned
	// end (fail-fast, abort-on-fail, an interrupt), in one line with the
	// server's message: WriteJSON adds "stopped" before "interrupted" and
	// WriteBlock prints it. Empty writes nothing.
	Stopped string
}

// Stats are one latency metric's statistics in milliseconds.
type Stats struct {
	// Key is vLLM's attribute name (ttft, tpot, itl, e2el); Name its label
	// word (TTFT); Header its section title.
	Key, Name, Header string
	Count             int64
	Mean, Median, Std float64
	// Percentiles has one value per Facts.Percentiles entry, in that order.
	Percentiles []Percentile
}

// Percentile is one percentile value in milliseconds.
type Percentile struct {
	P  float64
	Ms float64
}

// TurnGroup is TTFT and cache reuse of a group of turn indices.
type TurnGroup struct {
	// First and Last are the turn indices covered; Last is 0 when the group
	// is open-ended (the highest recorded index folds higher turns).
	First, Last int
	Requests    int64
	// P50, P95, P99 are TTFT percentiles in milliseconds.
	P50, P95, P99 float64
	// HitRate is the token-weighted KV-cache hit rate (0..1).
	HitRate float64
}

// ClassCount is the number of failed requests of one class.
type ClassCount struct {
	Class client.Class
	Count int64
}

// MetricCount is the number of clamped samples of one metric.
type MetricCount struct {
	Metric string
	Count  int64
}

// Summary is everything the block and result.json print, computed once by
// New. It is a plain value: safe to read from many goroutines, not to
// mutate concurrently.
type Summary struct {
	Facts

	// Completed and Failed count the turns sent in the measurement window
	// that succeeded or failed.
	Completed, Failed int64
	// TotalInputTokens and TotalOutputTokens are the recorded prompt and
	// output tokens of those turns.
	TotalInputTokens, TotalOutputTokens int64
	// Throughputs are per second of Facts.Duration.
	RequestThroughput, OutputThroughput, TotalTokenThroughput float64
	// RequestGoodput is the good requests (Counters.Good) per second, NaN
	// when not measured (saved as null, not printed, as vLLM does without
	// --goodput). SLOAttainment is the share of the window's requests,
	// failed ones included, that were good, NaN when not measured.
	RequestGoodput float64
	SLOAttainment  float64

	TTFT, TPOT, ITL, E2EL Stats

	// Workers are the successful requests and prompt tokens per worker the
	// responses named (--worker-header), and Balance their skew and CV;
	// nil and zero when no response named one. WorkerHeaderNote says when
	// the asked Facts.WorkerHeader was never seen (WorkerHeaderNote).
	Workers          map[string]*record.WorkerStat
	Balance          servermetrics.Balance
	WorkerHeaderNote string

	// FinishReasons counts the successful requests by finish_reason, and
	// FinishWarning says when most ended early (EarlyStopWarning).
	FinishReasons []FinishCount
	FinishWarning string

	// KV cache reuse (client-side, from usage.prompt_tokens_details).
	HitRate, HitRequestShare float64
	CachedTokens             int64
	UsageMissing             int64

	// FirstTurn is turn 1; LaterTurns every turn after it. ByTurn holds
	// each recorded turn index in order; record.MaxTurnIndex stands for
	// that turn and every later one.
	FirstTurn, LaterTurns TurnGroup
	ByTurn                []TurnGroup

	// Coordinated omission: TTFT measured from the intended send time, and
	// the schedule lag itself, in milliseconds.
	TTFTIntendedP50, TTFTIntendedP99 float64
	E2EIntendedP99                   float64
	LagP50, LagP99                   float64
	LateSends, Dropped               int64

	// ErrorsByClass lists non-zero failure classes in client.Classes order,
	// then any unknown class by name.
	ErrorsByClass []ClassCount
	// TopErrors are the window's most frequent distinct failures (at most
	// MaxTopErrors), with the server's own message.
	TopErrors []record.ErrorStat
	// Clamped lists metrics with samples clamped into the histogram range.
	Clamped []MetricCount

	ConversationsStarted, ConversationsCompleted int64
	Restarted, Fallbacks                         int64

	// HDR is the histogram configuration the percentiles come from.
	HDR hdr.Config
}

// MaxTopErrors is how many distinct failures a result keeps; the block
// prints the first MaxBlockErrors of them.
const (
	MaxTopErrors   = 20
	MaxBlockErrors = 5
)

// ErrInvalidFacts is returned by New for facts it cannot summarise.
var ErrInvalidFacts = errors.New("invalid result facts")

// New summarises a merged window. Throughputs are the tokens or requests of
// the turns sent in the measurement window (a turn belongs to the window in
// force when it was sent) divided by f.Duration, so turns that finish after
// the window closes still count, as in vLLM, where every request counts and
// the duration runs until the last one ends. New does not modify w.
func New(w *record.Window, f Facts) (*Summary, error) {
	if w == nil {
		return nil, fmt.Errorf("summarise window: %w: nil window", ErrInvalidFacts)
	}
	if f.Duration <= 0 {
		return nil, fmt.Errorf("summarise window: %w: duration %v", ErrInvalidFacts, f.Duration)
	}
	if f.Percentiles == nil {
		f.Percentiles = DefaultPercentiles
	}
	f.Percentiles = append([]float64(nil), f.Percentiles...)
	for _, p := range f.Percentiles {
		if !(p > 0 && p <= 100) {
			return nil, fmt.Errorf("summarise window: %w: percentile %v outside (0, 100]", ErrInvalidFacts, p)
		}
	}
	if math.IsNaN(f.RequestRate) || f.RequestRate < 0 {
		return nil, fmt.Errorf("summarise window: %w: request rate %v", ErrInvalidFacts, f.RequestRate)
	}
	if f.RequestRate == 0 {
		f.RequestRate = math.Inf(1)
	}
	if f.Burstiness == 0 {
		f.Burstiness = 1
	}
	if f.Backend == "" {
		f.Backend = DefaultBackend
	}
	if f.Tokenizer == "" {
		f.Tokenizer = f.Model
	}
	f.Target = client.RedactURL(f.Target)

	c := w.Counters
	secs := f.Duration.Seconds()
	s := &Summary{
		Facts:                  f,
		Completed:              c.Requests,
		Failed:                 c.Failed,
		TotalInputTokens:       c.InputTokens,
		TotalOutputTokens:      c.OutputTokens,
		RequestThroughput:      float64(c.Requests) / secs,
		RequestGoodput:         math.NaN(),
		SLOAttainment:          math.NaN(),
		OutputThroughput:       float64(c.OutputTokens) / secs,
		TotalTokenThroughput:   float64(c.InputTokens+c.OutputTokens) / secs,
		HitRate:                w.HitRate(),
		HitRequestShare:        w.HitRequestShare(),
		Workers:                w.Workers,
		Balance:                servermetrics.ClientBalance(w.Workers),
		WorkerHeaderNote:       WorkerHeaderNote(f.WorkerHeader, c.WorkerHeaders, c.Requests),
		FinishReasons:          finishCounts(c.FinishReasons),
		FinishWarning:          EarlyStopWarning(c.FinishReasons),
		CachedTokens:           c.CachedTokens,
		UsageMissing:           c.UsageMissing,
		LateSends:              c.LateSends,
		Dropped:                c.Dropped,
		ConversationsStarted:   c.ConversationsStarted,
		ConversationsCompleted: c.ConversationsCompleted,
		Restarted:              c.Restarted,
		Fallbacks:              c.Fallbacks,
		HDR:                    w.Config,
	}
	if !f.SLO.IsZero() {
		s.RequestGoodput = float64(c.Good) / secs
		if n := c.Requests + c.Failed; n > 0 {
			s.SLOAttainment = float64(c.Good) / float64(n)
		}
	}
	s.TopErrors = w.TopErrors(MaxTopErrors)
	s.TTFT = stats(w.Hist[record.TTFT], "ttft", "TTFT", "Time to First Token", f.Percentiles)
	s.TPOT = stats(w.Hist[record.TPOT], "tpot", "TPOT", "Time per Output Token (excl. 1st token)", f.Percentiles)
	s.ITL = stats(w.Hist[record.ITL], "itl", "ITL", "Inter-token Latency", f.Percentiles)
	s.E2EL = stats(w.Hist[record.E2E], "e2el", "E2EL", "End-to-end Latency", f.Percentiles)

	s.TTFTIntendedP50 = pct(w.Hist[record.TTFTIntended], 50)
	s.TTFTIntendedP99 = pct(w.Hist[record.TTFTIntended], 99)
	s.E2EIntendedP99 = pct(w.Hist[record.E2EIntended], 99)
	s.LagP50 = pct(w.Hist[record.Lag], 50)
	s.LagP99 = pct(w.Hist[record.Lag], 99)

	if err := s.turns(w); err != nil {
		return nil, err
	}

	known := make(map[client.Class]bool, len(client.Classes))
	for _, cl := range client.Classes {
		known[cl] = true
		if n := c.FailedByClass[cl]; n > 0 {
			s.ErrorsByClass = append(s.ErrorsByClass, ClassCount{Class: cl, Count: n})
		}
	}
	var unknown []ClassCount
	for cl, n := range c.FailedByClass {
		if !known[cl] && n > 0 {
			unknown = append(unknown, ClassCount{Class: cl, Count: n})
		}
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Class < unknown[j].Class })
	s.ErrorsByClass = append(s.ErrorsByClass, unknown...)

	for m := record.Metric(0); m < record.NumMetrics; m++ {
		if h := w.Hist[m]; h != nil && h.Clamped() > 0 {
			s.Clamped = append(s.Clamped, MetricCount{Metric: m.String(), Count: h.Clamped()})
		}
	}
	return s, nil
}

// turns fills the per-turn TTFT groups.
func (s *Summary) turns(w *record.Window) error {
	idx := make([]int, 0, len(w.Turns))
	for i, ts := range w.Turns {
		if ts != nil {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	cfg := w.Config
	later := cfg.New()
	var laterStats record.TurnStats
	s.FirstTurn = TurnGroup{First: 1, Last: 1}
	for _, i := range idx {
		ts := w.Turns[i]
		s.ByTurn = append(s.ByTurn, turnGroup(i, i, ts.TTFT, ts))
		if i == 1 {
			s.FirstTurn = turnGroup(1, 1, ts.TTFT, ts)
			continue
		}
		if ts.TTFT != nil {
			if err := later.Merge(ts.TTFT); err != nil {
				return fmt.Errorf("merge turn %d ttft: %w", i, err)
			}
		}
		laterStats.Requests += ts.Requests
		laterStats.PromptTokens += ts.PromptTokens
		laterStats.CachedTokens += ts.CachedTokens
		laterStats.RequestsWithCache += ts.RequestsWithCache
	}
	s.LaterTurns = turnGroup(2, 0, later, &laterStats)
	return nil
}

func turnGroup(first, last int, h *hdr.Histogram, ts *record.TurnStats) TurnGroup {
	g := TurnGroup{
		First:    first,
		Last:     last,
		Requests: ts.Requests,
		P50:      pct(h, 50),
		P95:      pct(h, 95),
		P99:      pct(h, 99),
	}
	if ts.PromptTokens > 0 {
		g.HitRate = float64(ts.CachedTokens) / float64(ts.PromptTokens)
	}
	return g
}

// stats reads one metric; an absent or empty histogram gives zeros, as
// vLLM's `np.mean(xs or 0)` does.
func stats(h *hdr.Histogram, key, name, header string, ps []float64) Stats {
	st := Stats{Key: key, Name: name, Header: header}
	if h != nil && h.Count() > 0 {
		sum := h.Summary()
		st.Count = sum.Count
		st.Mean = ms(sum.Mean)
		st.Std = ms(sum.Std)
		st.Median = ms(h.Percentile(50))
	}
	for _, p := range ps {
		st.Percentiles = append(st.Percentiles, Percentile{P: p, Ms: pct(h, p)})
	}
	return st
}

func pct(h *hdr.Histogram, p float64) float64 {
	if h == nil || h.Count() == 0 {
		return 0
	}
	return ms(h.Percentile(p))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pWord is vLLM's percentile label: `str(int(p)) if int(p) == p else str(p)`.
func pWord(p float64) string {
	if p == math.Trunc(p) {
		return strconv.FormatInt(int64(p), 10)
	}
	return pyFloat(p)
}
