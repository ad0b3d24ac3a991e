package ui

// Snapshot is one event of the feed (/ui/events), as JSON. Latencies are
// in milliseconds, rates per second, shares 0..1. A figure not measured
// is absent or null, never 0 where 0 would be a reading.
type Snapshot struct {
	// Time is when it was taken, Unix milliseconds.
	Time int64 `json:"t"`
	// Command is the command serving the page: run, coordinator or sweep.
	Command string `json:"command"`
	Stage   Stage  `json:"stage"`
	// Sweep is the sweep's progress; absent outside a sweep.
	Sweep *Sweep `json:"sweep,omitempty"`
	// Control says whether and how the page may change the concurrency.
	Control Control `json:"control"`
	// Rolling is the last minute's figures.
	Rolling Figures `json:"rolling"`
	// Series is one point a second over the last History, each over the
	// PointSpan before it.
	Series []Point `json:"series"`
	// Windows are the measurement windows, oldest first; the last may be
	// open (Closed false).
	Windows []Figures `json:"windows"`
	// Errors are the latest distinct error messages (redacted by the
	// client), most recent first.
	Errors []ErrorLine `json:"errors"`
	// Agents is each agent's health; empty without agents.
	Agents []Agent `json:"agents"`
	// ServerHitRate is the serving stack's prefix-cache hit rate over the
	// last measurement scraped (--scrape); absent without scraping.
	ServerHitRate *ServerHitRate `json:"server_hit_rate,omitempty"`
	// Baseline names the baseline loaded ("" none); the page reads it
	// from /ui/baseline when it changes.
	Baseline string `json:"baseline"`
	// BaselineVersion changes whenever a baseline is loaded.
	BaselineVersion int `json:"baseline_version"`
	// ProcessCPU is the serving process's CPU use, in cores, over the
	// last feed interval.
	ProcessCPU *float64 `json:"process_cpu,omitempty"`
}

// Stage is the level being run.
type Stage struct {
	Running bool   `json:"running"`
	Mode    string `json:"mode"`
	Level   int    `json:"level"`
	// Phase is "warm-up", "measure" or "idle".
	Phase string `json:"phase"`
	// Target is the sessions asked for (a live change included); InFlight
	// the sessions running.
	Target   int `json:"target"`
	InFlight int `json:"in_flight"`
}

// Sweep is a sweep's progress (pkg/sweep/runner's status).
type Sweep struct {
	Mode  string `json:"mode"`
	Level int    `json:"level"`
	Run   int    `json:"run"`
	// Phase is "switch", "readiness", "prime", "warm-up", "measure",
	// "drain", "cooldown", "restore" or "done".
	Phase string `json:"phase"`
	// StepLeft and SweepLeft are seconds left in the step and the sweep.
	StepLeft  float64 `json:"step_left_s"`
	SweepLeft float64 `json:"sweep_left_s"`
	// Done and Total count the points.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Line is the terminal's status line.
	Line string `json:"line"`
}

// Control is what the page's concurrency slider may do.
type Control struct {
	// Enabled is false during a sweep, in the open loop and when the
	// command has no way to change its level; Reason says why.
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	// Max is the highest level accepted.
	Max int `json:"max"`
}

// Figures are the figures of some span of turns.
type Figures struct {
	Label  string `json:"label"`
	Mode   string `json:"mode,omitempty"`
	Level  int    `json:"level,omitempty"`
	Closed bool   `json:"closed"`
	// Seconds is the span's length.
	Seconds float64 `json:"seconds"`
	// Requests are the successful turns, Errors the failed ones.
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	RPS       float64 `json:"rps"`
	OutputTPS float64 `json:"output_tps"`
	InputTPS  float64 `json:"input_tps"`
	// HitRate is the client-side KV-cache hit rate (token-weighted); null
	// without prompt tokens.
	HitRate *float64  `json:"hit_rate"`
	TTFT    Quantiles `json:"ttft"`
	TPOT    Quantiles `json:"tpot"`
	ITL     Quantiles `json:"itl"`
	E2E     Quantiles `json:"e2e"`
}

// Quantiles are a latency's percentiles in milliseconds (all 0 without
// samples).
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Point is one point of the charts: the figures over the PointSpan ending
// with second T.
type Point struct {
	T         int64     `json:"t"`
	RPS       float64   `json:"rps"`
	OutputTPS float64   `json:"output_tps"`
	ErrorRate float64   `json:"error_rate"`
	TTFT      Quantiles `json:"ttft"`
	TPOT      Quantiles `json:"tpot"`
	ITL       Quantiles `json:"itl"`
	E2E       Quantiles `json:"e2e"`
	InFlight  int       `json:"in_flight"`
	Target    int       `json:"target"`
}

// ErrorLine is one distinct error message.
type ErrorLine struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	Count   int64  `json:"count"`
	// Last is when it was last seen, Unix milliseconds.
	Last int64  `json:"last"`
	key  string // the normalized message
}

// Agent is one agent's health.
type Agent struct {
	ID string `json:"id"`
	// LastReport is the seconds since its last report.
	LastReport float64 `json:"last_report_s"`
	// RPS is its turns (ok and failed) per second over the last minute.
	RPS float64 `json:"rps"`
	// LagP95 and LagMax are the schedule lag of its last report, ms.
	LagP95 float64 `json:"lag_p95_ms"`
	LagMax float64 `json:"lag_max_ms"`
	// Coverage is the share of its last closed window it ran load; null
	// before one closed.
	Coverage *float64 `json:"coverage"`
	Lost     bool     `json:"lost"`
	// CPU is the agent process's CPU use, in cores, between its last two
	// heartbeats (about a second); null before two heartbeats, or where
	// the agent cannot read its CPU time.
	CPU *float64 `json:"cpu_cores"`
	// Streams is the requests it was streaming and Sessions the
	// conversations it ran at its last heartbeat; null before one.
	Streams  *int64 `json:"streams"`
	Sessions *int64 `json:"sessions"`
	// LastHeartbeat is the seconds since its last heartbeat (0 before
	// one).
	LastHeartbeat float64 `json:"last_heartbeat_s"`
}

// ServerHitRate is the server-side prefix-cache hit rate of a measurement.
type ServerHitRate struct {
	Rate  float64 `json:"rate"`
	Label string  `json:"label"`
}
