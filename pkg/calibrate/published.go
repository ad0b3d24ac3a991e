package calibrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// Published is a published sweep to reproduce (testdata/*.json).
type Published struct {
	Profile      string  `json:"profile"`
	Source       string  `json:"source"`
	Replicas     int     `json:"replicas"`
	PromptTokens int     `json:"prompt_tokens"`
	MaxTokens    int     `json:"max_tokens"`
	OutputTokens float64 `json:"output_tokens"`
	Levels       []struct {
		Sessions int     `json:"sessions"`
		KVP50    float64 `json:"kv_p50"`
		KVP95    float64 `json:"kv_p95"`
		RRP50    float64 `json:"rr_p50"`
		RRP95    float64 `json:"rr_p95"`
	} `json:"levels"`
	HitRate struct {
		KV float64 `json:"kv"`
		RR float64 `json:"rr"`
	} `json:"hit_rate"`
	SaturationRPS float64 `json:"saturation_rps"`
	SLAP95        float64 `json:"sla_p95_ms"`
	SLASessions   struct {
		KV int `json:"kv"`
		RR int `json:"rr"`
	} `json:"sla_sessions"`
}

// LoadPublished reads a published sweep.
func LoadPublished(path string) (*Published, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read published sweep: %w", err)
	}
	var p Published
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode published sweep %s: %w", path, err)
	}
	return &p, nil
}

// ttft returns the published p50 and p95 in ms for a level and mode.
func (p *Published) ttft(sessions int, m sim.Mode) (p50, p95 float64, ok bool) {
	for _, l := range p.Levels {
		if l.Sessions != sessions {
			continue
		}
		if m == sim.ModeKV {
			return l.KVP50, l.KVP95, true
		}
		return l.RRP50, l.RRP95, true
	}
	return 0, 0, false
}

// Tolerance is how far a simulated figure may be from the published one.
type Tolerance struct {
	TTFT       float64 // relative, 0.25 is +-25%
	HitPoints  float64 // absolute, 0.03 is 3 points
	Saturation float64 // relative, on requests/s at the highest level
	// SLA checks the highest level each mode holds at the published SLA;
	// it needs the published levels up to the breakpoint.
	SLA bool
	// SLABand, with SLA, is how close to the SLA a published p95 may be
	// and still not decide the breakpoint (relative, 0.05 is 5%): a level
	// whose published p95 is at most SLA x (1 - SLABand) must be held, one
	// above SLA x (1 + SLABand) must not, and those between may go either
	// way (SLARange). At 0 the breakpoint must equal the published one.
	SLABand float64
	// MinP95Turns, when set, checks a cell's TTFT p95 only when it holds
	// at least that many turns: below, the p95 rests on a handful of
	// turns above it (at 20 sessions, whether a few cold first turns fall
	// in the window or not), and the cell says "few turns" instead.
	MinP95Turns int
}

// Compare writes the simulated table beside the published one, with the
// ratio of each cell, and returns one line per figure out of tolerance.
func Compare(w io.Writer, pub *Published, pts []Point, tol Tolerance) []string {
	var bad []string
	check := func(ok bool, format string, args ...any) string {
		if ok {
			return ""
		}
		bad = append(bad, fmt.Sprintf(format, args...))
		return " <-- out"
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Fprintf(w, "TTFT in simulated ms (tolerance +-%.0f%%); ratio = simulated / published\n", tol.TTFT*100)
	fmt.Fprintf(w, "%-12s %8s %6s %12s %12s %7s %12s %7s %8s %7s %6s %6s\n",
		"mode", "sessions", "sent", "p50 sim", "p50 pub", "ratio", "p95 sim", "p95 pub", "ratio", "req/s", "out", "hit%")
	hold := Holds(pub, pts)
	last := map[sim.Mode]Point{}
	for _, p := range pts {
		p50, p95, ok := pub.ttft(p.Sessions, p.Mode)
		if !ok {
			continue
		}
		r50, r95 := ms(p.TTFTP50)/p50, ms(p.TTFTP95)/p95
		m50 := check(math.Abs(r50-1) <= tol.TTFT, "%s %d sessions: TTFT p50 %.0f ms against %.0f (x%.2f)", p.Mode, p.Sessions, ms(p.TTFTP50), p50, r50)
		m95 := " (few turns: p95 not checked)"
		if p.Requests >= tol.MinP95Turns {
			m95 = check(math.Abs(r95-1) <= tol.TTFT, "%s %d sessions: TTFT p95 %.0f ms against %.0f (x%.2f)", p.Mode, p.Sessions, ms(p.TTFTP95), p95, r95)
		}
		fmt.Fprintf(w, "%-12s %8d %6d %12.0f %12.0f %7.2f %12.0f %7.0f %8.2f %7.2f %6.0f %6.1f%s%s\n",
			p.Mode, p.Sessions, p.Requests, ms(p.TTFTP50), p50, r50, ms(p.TTFTP95), p95, r95, p.RPS, p.MeanOutput, 100*p.HitRate, m50, m95)
		if p.Sessions >= last[p.Mode].Sessions {
			last[p.Mode] = p
		}
	}
	fmt.Fprintln(w)
	for _, m := range []sim.Mode{sim.ModeKV, sim.ModeRoundRobin} {
		var hits, hitN float64
		for _, p := range pts {
			if p.Mode == m {
				hits += p.HitRate
				hitN++
			}
		}
		if hitN == 0 {
			continue
		}
		want := pub.HitRate.RR
		if m == sim.ModeKV {
			want = pub.HitRate.KV
		}
		got := hits / hitN
		mark := check(math.Abs(got-want) <= tol.HitPoints, "%s: hit rate %.1f%% against %.1f%%", m, got*100, want*100)
		fmt.Fprintf(w, "hit rate %-12s simulated %5.1f%%  published %5.1f%%  diff %+5.1f points%s\n", m, got*100, want*100, (got-want)*100, mark)
		p := last[m]
		r := p.RPS / pub.SaturationRPS
		mark = check(math.Abs(r-1) <= tol.Saturation, "%s: %.2f req/s at %d sessions against %.1f (x%.2f)", m, p.RPS, p.Sessions, pub.SaturationRPS, r)
		fmt.Fprintf(w, "req/s    %-12s simulated %5.2f   published %5.2f   ratio %.2f at %d sessions (tolerance +-%.0f%%)%s\n",
			m, p.RPS, pub.SaturationRPS, r, p.Sessions, tol.Saturation*100, mark)
		fmt.Fprintf(w, "output   %-12s simulated %5.0f   published %5.0f   tokens per turn\n", m, p.MeanOutput, pub.OutputTokens)
	}
	fmt.Fprintln(w)
	pubHold := map[sim.Mode]int{sim.ModeKV: pub.SLASessions.KV, sim.ModeRoundRobin: pub.SLASessions.RR}
	for _, m := range []sim.Mode{sim.ModeKV, sim.ModeRoundRobin} {
		mark, band := "", ""
		if tol.SLA {
			lo, hi := pub.SLARange(m, tol.SLABand)
			if lo != hi {
				band = fmt.Sprintf(" (%s-%s accepted: published p95s within %.0f%% of the SLA do not decide it)", none(lo), none(hi), tol.SLABand*100)
			}
			mark = check(hold[m] >= lo && hold[m] <= hi, "%s: holds the %.0f ms p95 SLA up to %s sessions, published %s", m, pub.SLAP95, none(hold[m]), none(pubHold[m]))
		}
		fmt.Fprintf(w, "SLA p95 <= %.0f ms  %-12s simulated holds up to %s, published %s%s%s\n", pub.SLAP95, m, none(hold[m]), none(pubHold[m]), band, mark)
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "\n%d figure(s) out of tolerance:\n  %s\n", len(bad), strings.Join(bad, "\n  "))
	}
	return bad
}

// SLARange returns the lowest and highest breakpoint (0: none) that mode
// may have at the published SLA when published p95s within band of it
// (relative) do not decide it: the held levels must include the leading
// levels whose published p95 is at most SLA x (1 - band), and must stop
// before the first one above SLA x (1 + band). With band 0 both are the
// published breakpoint.
func (p *Published) SLARange(mode sim.Mode, band float64) (lo, hi int) {
	under, over := true, false
	for _, l := range p.Levels {
		_, p95, _ := p.ttft(l.Sessions, mode)
		if under && p95 <= p.SLAP95*(1-band) {
			lo = l.Sessions
		} else {
			under = false
		}
		if p95 > p.SLAP95*(1+band) {
			over = true
		}
		if !over {
			hi = l.Sessions
		}
	}
	return lo, hi
}

// Holds returns, per mode, the highest level up to which every published
// level's TTFT p95 is within the published SLA (0: not even the first).
// pts are in level order per mode.
func Holds(pub *Published, pts []Point) map[sim.Mode]int {
	hold := map[sim.Mode]int{}
	broke := map[sim.Mode]bool{}
	for _, p := range pts {
		if _, _, ok := pub.ttft(p.Sessions, p.Mode); !ok || broke[p.Mode] {
			continue
		}
		if float64(p.TTFTP95)/float64(time.Millisecond) <= pub.SLAP95 {
			hold[p.Mode] = p.Sessions
		} else {
			broke[p.Mode] = true
		}
	}
	return hold
}

func none(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}
