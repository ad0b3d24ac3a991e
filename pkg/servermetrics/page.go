package servermetrics

import (
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Page is what fleetbench keeps of one /metrics page: the series of the
// metric names in the catalogue (catalog.go), every label set kept apart so
// that counters are differenced per series. Other names are dropped while
// the page is read, so a Page stays small whatever the server exports.
// A Page is immutable once built and safe to share between goroutines.
type Page struct {
	scalars map[string][]scalar // counters, gauges and untyped, by name
	hists   map[string][]histSeries
	// spelled maps a catalogued counter name to the name the page exported
	// it under, where the two differ (a counter without "_total").
	spelled map[string]string
}

// scalar is one series of a counter, gauge or untyped metric.
type scalar struct {
	labels []*dto.LabelPair
	key    string // the label set, canonical
	v      float64
}

// histSeries is one series of a histogram.
type histSeries struct {
	labels []*dto.LabelPair
	key    string
	h      hist
}

// Has reports whether the page holds at least one series of name.
func (p *Page) Has(name string) bool {
	if p == nil {
		return false
	}
	return len(p.scalars[name]) > 0 || len(p.hists[name]) > 0
}

// Names returns the catalogued metric names present on the page, sorted.
func (p *Page) Names() []string {
	if p == nil {
		return nil
	}
	names := make([]string, 0, len(p.scalars)+len(p.hists))
	for n := range p.scalars {
		names = append(names, n)
	}
	for n := range p.hists {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// exported returns the name the page exported the catalogued name under.
func (p *Page) exported(name string) string {
	if p != nil {
		if s, ok := p.spelled[name]; ok {
			return s
		}
	}
	return name
}

// newPage keeps the families of fams whose names the catalogue reads. A
// counter exported without its "_total" suffix (some vLLM-compatible
// servers and older exporters name them so) is kept under its catalogued
// name, unless the page also has the "_total" one, which is then read.
func newPage(fams map[string]*dto.MetricFamily) *Page {
	p := &Page{scalars: map[string][]scalar{}, hists: map[string][]histSeries{}}
	for exported, fam := range fams {
		name := exported
		if !catalogue[name] {
			canon, ok := counterAlias[name]
			if !ok || fams[canon] != nil {
				continue
			}
			name = canon
			if p.spelled == nil {
				p.spelled = map[string]string{}
			}
			p.spelled[canon] = exported
		}
		for _, m := range fam.GetMetric() {
			labels := m.GetLabel()
			switch {
			case m.GetHistogram() != nil:
				p.hists[name] = append(p.hists[name], histSeries{labels: labels, key: seriesKey(labels), h: fromDTO(m.GetHistogram())})
			case m.GetCounter() != nil:
				p.scalars[name] = append(p.scalars[name], scalar{labels: labels, key: seriesKey(labels), v: m.GetCounter().GetValue()})
			case m.GetGauge() != nil:
				p.scalars[name] = append(p.scalars[name], scalar{labels: labels, key: seriesKey(labels), v: m.GetGauge().GetValue()})
			case m.GetUntyped() != nil:
				// OpenMetrics counters (foo_total under "# TYPE foo
				// counter") reach us as untyped families named foo_total.
				p.scalars[name] = append(p.scalars[name], scalar{labels: labels, key: seriesKey(labels), v: m.GetUntyped().GetValue()})
			}
		}
	}
	return p
}

// seriesKey is a canonical form of a label set: pairs sorted by name.
func seriesKey(labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return ""
	}
	pairs := make([]string, len(labels))
	for i, l := range labels {
		pairs[i] = l.GetName() + "=" + l.GetValue()
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// labelValue returns the value of label name, or "".
func labelValue(labels []*dto.LabelPair, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// matches reports whether labels carry every name=value of want.
func matches(labels []*dto.LabelPair, want map[string]string) bool {
	for k, v := range want {
		if labelValue(labels, k) != v {
			return false
		}
	}
	return true
}

// fromDTO converts a parsed histogram to cumulative buckets sorted by upper
// bound, the +Inf bucket left out (it is the count).
func fromDTO(h *dto.Histogram) hist {
	out := hist{sum: h.GetSampleSum(), count: float64(h.GetSampleCount())}
	if h.SampleCountFloat != nil {
		out.count = h.GetSampleCountFloat()
	}
	for _, b := range h.GetBucket() {
		le := b.GetUpperBound()
		if math.IsInf(le, +1) {
			continue
		}
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		out.buckets = append(out.buckets, bucket{le: le, cum: c})
	}
	slices.SortFunc(out.buckets, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	return out
}
