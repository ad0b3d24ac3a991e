package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// baselineMode is one mode's figures at one level in baseline.json.
type baselineMode struct {
	TTFTP50Ms  float64 `json:"ttft_p50_ms"`
	TTFTP95Ms  float64 `json:"ttft_p95_ms"`
	HitRatePct float64 `json:"hit_rate_pct"`
	OutputTPS  float64 `json:"output_tps"`
	TPOTP50Ms  float64 `json:"tpot_p50_ms"`
	TPOTP95Ms  float64 `json:"tpot_p95_ms"`
	E2EP50Ms   float64 `json:"e2e_p50_ms"`
	E2EP95Ms   float64 `json:"e2e_p95_ms"`
	Runs       int     `json:"runs"`
	// GoodputRPS and SLOAttainmentPct are present only when goodput was
	// measured (the sweep's goodput objectives).
	GoodputRPS       *float64 `json:"goodput_rps,omitempty"`
	SLOAttainmentPct *float64 `json:"slo_attainment_pct,omitempty"`
}

// baselineJSON is baseline.json: per level (keyed by the level as a
// string) and mode, the figures across runs.
type baselineJSON struct {
	SweepID     string                             `json:"sweep_id"`
	SLAMs       float64                            `json:"sla_ms"`
	Baseline    string                             `json:"baseline"`
	Candidate   string                             `json:"candidate"`
	Levels      []int                              `json:"levels"`
	Modes       []string                           `json:"modes"`
	ByLevel     map[string]map[string]baselineMode `json:"by_level"`
	Breakpoints map[string]int                     `json:"breakpoints"`
}

// writeBaseline writes baseline.json. Breakpoints maps each mode to its
// breakpoint at the SLA, 0 meaning None.
func (a *analysis) writeBaseline(w io.Writer) error {
	j := baselineJSON{
		SweepID: a.s.ID, SLAMs: ms(a.s.SLA), Baseline: a.s.Baseline, Candidate: a.s.Candidate,
		Levels: a.levels, Modes: a.modes, ByLevel: map[string]map[string]baselineMode{},
		Breakpoints: map[string]int{},
	}
	for _, l := range a.levels {
		per := map[string]baselineMode{}
		for _, m := range a.modes {
			c := a.cell(m, l)
			if c == nil {
				continue
			}
			r := &c.pooled
			per[m] = baselineMode{
				TTFTP50Ms: round(1000*r.TTFTP50, 3), TTFTP95Ms: round(1000*r.TTFTP95, 3),
				HitRatePct: round(100*r.HitRate, 3), OutputTPS: round(r.OutputTPS, 3),
				TPOTP50Ms: round(1000*r.TPOTP50, 3), TPOTP95Ms: round(1000*r.TPOTP95, 3),
				E2EP50Ms: round(1000*r.E2EP50, 3), E2EP95Ms: round(1000*r.E2EP95, 3),
				Runs: len(c.runs),
			}
			if r.Goodput != nil && r.SLOAttainment != nil {
				g, a := round(*r.Goodput, 3), round(100**r.SLOAttainment, 3)
				bm := per[m]
				bm.GoodputRPS, bm.SLOAttainmentPct = &g, &a
				per[m] = bm
			}
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
