package servermetrics

import (
	"math"
	"time"
)

// gaugeFigure is a figure sampled from gauges over a window.
type gaugeFigure int

const (
	gaugeQueue gaugeFigure = iota
	gaugeRunning
	gaugeKVUsage
	gaugeHitRate
	numGaugeFigures
)

// gaugeFigureSources are the sources of each gauge figure; gaugeFigureTotal
// says how endpoints combine into the window's total at one instant.
var (
	gaugeFigureSources = [numGaugeFigures][]gaugeSource{queueSources, runningSources, kvUsageSources, hitGaugeSources}
	gaugeFigureTotal   = [numGaugeFigures]combine{combineSum, combineSum, combineMax, combineMean}
)

// readGauge returns the first of srcs present on p, its series combined.
func readGauge(p *Page, srcs []gaugeSource) (v float64, gs gaugeSource, ok bool) {
	if p == nil {
		return 0, gaugeSource{}, false
	}
	for _, g := range srcs {
		var vals []float64
		for _, sc := range p.scalars[g.name] {
			if matches(sc.labels, g.match) {
				vals = append(vals, sc.v)
			}
		}
		if len(vals) > 0 {
			return combineValues(vals, g.combine), g, true
		}
	}
	return 0, gaugeSource{}, false
}

// combineValues combines a non-empty list of values.
func combineValues(vals []float64, c combine) float64 {
	out := vals[0]
	for _, v := range vals[1:] {
		if c == combineMax {
			out = math.Max(out, v)
		} else {
			out += v
		}
	}
	if c == combineMean {
		out /= float64(len(vals))
	}
	return out
}

// stat is a bounded summary of gauge samples: count, sum and max.
type stat struct {
	n        int
	sum, max float64
	name     string // the metric read
}

func (s *stat) add(v float64, name string) {
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
	s.sum += v
	s.name = name
}

func (s stat) meanPtr() *float64 {
	if s.n == 0 {
		return nil
	}
	return ptr(s.sum / float64(s.n))
}

func (s stat) maxPtr() *float64 {
	if s.n == 0 {
		return nil
	}
	return ptr(s.max)
}

// gauges accumulates the gauge samples of one window, per endpoint and for
// the total, in O(endpoints) memory however long the window. Not safe for
// concurrent use: the Scraper guards it.
type gauges struct {
	since time.Time
	per   map[string]*[numGaugeFigures]stat
	total [numGaugeFigures]stat
}

func newGauges(since time.Time) *gauges {
	return &gauges{since: since, per: map[string]*[numGaugeFigures]stat{}}
}

// observe adds the gauges of one snapshot. A snapshot taken before the
// window opened (a sampler round that raced the window's edge) is ignored.
func (g *gauges) observe(snap Snapshot) {
	if snap.At.Before(g.since) {
		return
	}
	for f := range numGaugeFigures {
		type reading struct {
			v  float64
			gs gaugeSource
		}
		var rs []reading
		best := levelFrontend
		for _, ep := range snap.Endpoints {
			v, gs, ok := readGauge(ep.Page, gaugeFigureSources[f])
			if !ok {
				continue
			}
			st := g.per[ep.Endpoint]
			if st == nil {
				st = &[numGaugeFigures]stat{}
				g.per[ep.Endpoint] = st
			}
			st[f].add(v, gs.name)
			rs = append(rs, reading{v, gs})
			best = min(best, gs.level)
		}
		// The total adds up one level of the stack only (see level).
		var vals []float64
		name := ""
		for _, r := range rs {
			if r.gs.level == best {
				vals = append(vals, r.v)
				if name == "" {
					name = r.gs.name
				}
			}
		}
		if len(vals) > 0 {
			g.total[f].add(combineValues(vals, gaugeFigureTotal[f]), name)
		}
	}
}
