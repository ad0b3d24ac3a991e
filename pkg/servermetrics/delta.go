package servermetrics

import (
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// seriesDelta is how much one counter series grew over a window.
type seriesDelta struct {
	labels []*dto.LabelPair
	d      float64
}

// counterDeltas differences source s between two pages series by series. A
// series that went down restarted: it contributes its end value (counted
// from the reset) and reset is true. A series absent from start was created
// in the window and contributes its end value. ok is false when end has no
// matching series.
func counterDeltas(start, end *Page, s source) (ds []seriesDelta, reset, ok bool) {
	if s.histSum {
		before := map[string]hist{}
		for _, hs := range start.hists[s.name] {
			before[hs.key] = hs.h
		}
		for _, hs := range end.hists[s.name] {
			if !matches(hs.labels, s.match) {
				continue
			}
			ok = true
			b := before[hs.key]
			d := hs.h.sum - b.sum
			if hs.h.count < b.count || d < 0 {
				d, reset = hs.h.sum, true
			}
			ds = append(ds, seriesDelta{labels: hs.labels, d: d})
		}
		return ds, reset, ok
	}
	before := map[string]float64{}
	for _, sc := range start.scalars[s.name] {
		before[sc.key] = sc.v
	}
	for _, sc := range end.scalars[s.name] {
		if !matches(sc.labels, s.match) {
			continue
		}
		ok = true
		d := sc.v - before[sc.key]
		if d < 0 {
			d, reset = sc.v, true
		}
		ds = append(ds, seriesDelta{labels: sc.labels, d: d})
	}
	return ds, reset, ok
}

// total adds up series deltas.
func total(ds []seriesDelta) float64 {
	var t float64
	for _, d := range ds {
		t += d.d
	}
	return t
}

// counterCalc is one counter figure of one endpoint over a window.
type counterCalc struct {
	ok    bool
	src   source
	name  string // src's name as the page spelled it
	v     float64
	reset bool
	by    []seriesDelta // per series, for per-worker counts
}

// pickCounter reads the first of srcs present on end.
func pickCounter(start, end *Page, srcs []source) counterCalc {
	for _, s := range srcs {
		if ds, reset, ok := counterDeltas(start, end, s); ok {
			return counterCalc{ok: true, src: s, name: end.exported(s.name), v: total(ds), reset: reset, by: ds}
		}
	}
	return counterCalc{}
}

// ratioCalc is a num/den figure of one endpoint over a window.
type ratioCalc struct {
	ok       bool
	src      ratioSource
	name     string // "num / den" as the page spelled them
	num, den float64
	reset    bool
}

// pickRatio reads the first of srcs whose numerator and denominator are
// both on end.
func pickRatio(start, end *Page, srcs []ratioSource) ratioCalc {
	for _, r := range srcs {
		nd, nr, nok := counterDeltas(start, end, r.num)
		dd, dr, dok := counterDeltas(start, end, r.den)
		if nok && dok {
			name := end.exported(r.num.name) + " / " + end.exported(r.den.name)
			return ratioCalc{ok: true, src: r, name: name, num: total(nd), den: total(dd), reset: nr || dr}
		}
	}
	return ratioCalc{}
}

// histCalc is a latency histogram of one endpoint over a window.
type histCalc struct {
	ok        bool
	src       source
	h         hist
	bucketsOK bool // false when series with different bounds were added
	reset     bool
}

// pickHist reads the first of srcs present on end and adds up its series'
// deltas.
func pickHist(start, end *Page, srcs []source) histCalc {
	for _, s := range srcs {
		series := end.hists[s.name]
		if len(series) == 0 {
			continue
		}
		before := map[string]hist{}
		for _, hs := range start.hists[s.name] {
			before[hs.key] = hs.h
		}
		c := histCalc{ok: true, src: s, bucketsOK: true}
		for _, hs := range series {
			d, reset := histDelta(before[hs.key], hs.h)
			c.reset = c.reset || reset
			var ok bool
			c.h, ok = c.h.add(d)
			c.bucketsOK = c.bucketsOK && ok
		}
		return c
	}
	return histCalc{}
}

// workerName names the engine a series belongs to: the value of a worker or
// pod label when there is one (the simulator's worker-0, a pod name), else
// the endpoint followed by its engine-identifying labels.
func workerName(endpoint string, labels []*dto.LabelPair) string {
	for _, l := range []string{"worker", "pod"} {
		if v := labelValue(labels, l); v != "" {
			return v
		}
	}
	name := endpoint
	for _, l := range workerLabels {
		if v := labelValue(labels, l); v != "" {
			name += " " + l + "=" + v
		}
	}
	return strings.TrimSpace(name)
}
