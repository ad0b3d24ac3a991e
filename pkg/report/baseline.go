package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// BaselineMode is one mode's figures at one level in baseline.json.
type BaselineMode struct {
	TTFTP50Ms  float64 `json:"ttft_p50_ms"`
	TTFTP95Ms  float64 `json:"ttft_p95_ms"`
	HitRatePct float64 `json:"hit_rate_pct"`
	// OutputTPS and the TPOT and E2E figures are absent when the inputs did
	// not measure them (TSVs without those columns), never 0.
	OutputTPS *float64 `json:"output_tps,omitempty"`
	TPOTP50Ms *float64 `json:"tpot_p50_ms,omitempty"`
	TPOTP95Ms *float64 `json:"tpot_p95_ms,omitempty"`
	E2EP50Ms  *float64 `json:"e2e_p50_ms,omitempty"`
	E2EP95Ms  *float64 `json:"e2e_p95_ms,omitempty"`
	Runs      int      `json:"runs"`
	// GoodputRPS and SLOAttainmentPct are present only when goodput was
	// measured (the sweep's goodput objectives).
	GoodputRPS       *float64 `json:"goodput_rps,omitempty"`
	SLOAttainmentPct *float64 `json:"slo_attainment_pct,omitempty"`
	// The server-side figures (pkg/servermetrics), present only when measured:
	// rates and KV usage in percent, as hit_rate_pct.
	ServerHitRatePct  *float64 `json:"server_hit_rate_pct,omitempty"`
	QueueMean         *float64 `json:"queue_mean,omitempty"`
	QueueMax          *float64 `json:"queue_max,omitempty"`
	KVUsageMaxPct     *float64 `json:"kv_usage_max_pct,omitempty"`
	Preemptions       *float64 `json:"preemptions,omitempty"`
	WorkerSkew        *float64 `json:"worker_skew,omitempty"`
	SpecAcceptRatePct *float64 `json:"spec_accept_rate_pct,omitempty"`
}

// Baseline is baseline.json: per level (keyed by the level as a
// string) and mode, the figures across runs. ParseBaseline reads and
// checks one.
type Baseline struct {
	SweepID     string                             `json:"sweep_id"`
	SLAMs       float64                            `json:"sla_ms"`
	Baseline    string                             `json:"baseline"`
	Candidate   string                             `json:"candidate"`
	Levels      []int                              `json:"levels"`
	Modes       []string                           `json:"modes"`
	ByLevel     map[string]map[string]BaselineMode `json:"by_level"`
	Breakpoints map[string]int                     `json:"breakpoints"`
}

// writeBaseline writes baseline.json. Breakpoints maps each mode to its
// breakpoint at the SLA, 0 meaning None.
func (a *analysis) writeBaseline(w io.Writer) error {
	j := Baseline{
		SweepID: a.s.ID, SLAMs: ms(a.s.SLA), Baseline: a.s.Baseline, Candidate: a.s.Candidate,
		Levels: a.levels, Modes: a.modes, ByLevel: map[string]map[string]BaselineMode{},
		Breakpoints: map[string]int{},
	}
	for _, l := range a.levels {
		per := map[string]BaselineMode{}
		for _, m := range a.modes {
			c := a.cell(m, l)
			if c == nil {
				continue
			}
			r := &c.pooled
			measured := func(col string, v, scale float64) *float64 {
				if !r.Measured(col) {
					return nil
				}
				x := round(scale*v, 3)
				return &x
			}
			per[m] = BaselineMode{
				TTFTP50Ms: round(1000*r.TTFTP50, 3), TTFTP95Ms: round(1000*r.TTFTP95, 3),
				HitRatePct: round(100*r.HitRate, 3), OutputTPS: measured("output_tps", r.OutputTPS, 1),
				TPOTP50Ms: measured("tpot_p50_sec", r.TPOTP50, 1000), TPOTP95Ms: measured("tpot_p95_sec", r.TPOTP95, 1000),
				E2EP50Ms: measured("e2e_p50_sec", r.E2EP50, 1000), E2EP95Ms: measured("e2e_p95_sec", r.E2EP95, 1000),
				Runs: len(c.runs),
			}
			if r.Goodput != nil && r.SLOAttainment != nil {
				g, a := round(*r.Goodput, 3), round(100**r.SLOAttainment, 3)
				bm := per[m]
				bm.GoodputRPS, bm.SLOAttainmentPct = &g, &a
				per[m] = bm
			}
			bm := per[m]
			bm.ServerHitRatePct, bm.KVUsageMaxPct, bm.SpecAcceptRatePct = roundOpt(r.ServerHitRate, 100), roundOpt(r.KVUsageMax, 100), roundOpt(r.SpecAcceptRate, 100)
			bm.QueueMean, bm.QueueMax, bm.Preemptions, bm.WorkerSkew = roundOpt(r.QueueMean, 1), roundOpt(r.QueueMax, 1), roundOpt(r.Preemptions, 1), roundOpt(r.WorkerSkew, 1)
			per[m] = bm
		}
		j.ByLevel[strconv.Itoa(l)] = per
	}
	for _, b := range a.primary.Breakpoints {
		j.Breakpoints[b.Mode] = b.Level
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&j); err != nil {
		return fmt.Errorf("write baseline.json: %w", err)
	}
	return nil
}

// roundOpt is scale × *v rounded to 3 decimals, nil when v is.
func roundOpt(v *float64, scale float64) *float64 {
	if v == nil {
		return nil
	}
	r := round(scale**v, 3)
	return &r
}

// MaxBaselineSize bounds a baseline.json ParseBaseline accepts.
const MaxBaselineSize = 4 << 20

// ParseBaseline reads a baseline.json as sweeps write it and checks it:
// one JSON object whose by_level keys are levels (positive integers), each
// with at least one mode, and whose figures are finite and not negative.
// Its error says what is wrong in one line.
func ParseBaseline(b []byte) (*Baseline, error) {
	if len(b) > MaxBaselineSize {
		return nil, fmt.Errorf("parse baseline.json: %d bytes, more than %d", len(b), MaxBaselineSize)
	}
	var j Baseline
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("parse baseline.json: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse baseline.json: more than one JSON value")
	}
	if len(j.ByLevel) == 0 {
		return nil, errors.New("parse baseline.json: no by_level figures (is it a sweep's baseline.json?)")
	}
	for key, modes := range j.ByLevel {
		if l, err := strconv.Atoi(key); err != nil || l <= 0 {
			return nil, fmt.Errorf("parse baseline.json: by_level key %q: want a level (a positive integer)", key)
		}
		if len(modes) == 0 {
			return nil, fmt.Errorf("parse baseline.json: level %s has no mode", key)
		}
		for m, f := range modes {
			for name, v := range map[string]float64{"ttft_p50_ms": f.TTFTP50Ms, "ttft_p95_ms": f.TTFTP95Ms, "hit_rate_pct": f.HitRatePct} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return nil, fmt.Errorf("parse baseline.json: level %s mode %q: %s %v: want a number >= 0", key, m, name, v)
				}
			}
			for name, v := range map[string]*float64{"output_tps": f.OutputTPS, "tpot_p50_ms": f.TPOTP50Ms, "tpot_p95_ms": f.TPOTP95Ms,
				"e2e_p50_ms": f.E2EP50Ms, "e2e_p95_ms": f.E2EP95Ms} {
				if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
					return nil, fmt.Errorf("parse baseline.json: level %s mode %q: %s %v: want a number >= 0", key, m, name, *v)
				}
			}
		}
	}
	return &j, nil
}
