package report

import (
	"fmt"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/result"
)

// hasServer reports whether any row of the sweep has a server-side
// figure (the points were scraped, or a TSV has the columns).
func (a *analysis) hasServer() bool {
	for _, c := range a.cells {
		for i := range c.runs {
			r := &c.runs[i]
			for _, v := range []*float64{r.ServerHitRate, r.QueueMean, r.QueueMax, r.KVUsageMax, r.Preemptions, r.WorkerSkew, r.SpecAcceptRate} {
				if v != nil {
					return true
				}
			}
		}
	}
	return false
}

// writeServer writes the server-side metrics per level and mode, and a
// line for every point whose client- and server-side hit rates disagree;
// nothing when no point was scraped.
func (a *analysis) writeServer(b *md) {
	if !a.hasServer() {
		return
	}
	b.h2("Server-side metrics")
	b.p("From the serving stack's own /metrics (--scrape), read at the start and end of each level's measured time; " +
		"across runs the mean, and the highest for the maxima. \"n/a\": not measured (no such metric, or an endpoint not read).")
	fixed := func(prec int) func(float64) string {
		return func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }
	}
	b.p("KV-cache hit rate, client side (usage's cached tokens) against server side (prefix-cache counters), in percent.")
	a.perModeTable(b, []metricCol{
		pctCol("client (%)", "", func(r *Row) float64 { return r.HitRate }),
		optCell("server (%)", func(r *Row) *float64 { return r.ServerHitRate }, pctCell),
	})
	b.p("Queue: requests waiting (mean and max of the gauge samples); KV usage: the highest KV-cache use of any engine, in percent; worker skew: max ÷ mean requests per worker (1 is even).")
	a.perModeTable(b, []metricCol{
		optCell("queue mean", func(r *Row) *float64 { return r.QueueMean }, fixed(1)),
		optCell("queue max", func(r *Row) *float64 { return r.QueueMax }, fixed(0)),
		optCell("KV usage max (%)", func(r *Row) *float64 { return r.KVUsageMax }, pctCell),
		optCell("preemptions", func(r *Row) *float64 { return r.Preemptions }, fixed(0)),
		optCell("worker skew", func(r *Row) *float64 { return r.WorkerSkew }, fixed(2)),
		optCell("spec. acceptance (%)", func(r *Row) *float64 { return r.SpecAcceptRate }, pctCell),
	})
	a.writeReconciliation(b)
}

// writeReconciliation compares the client- and server-side hit rates
// point by point: a line for every point where they disagree, and where
// a side was not measured, that the comparison was not made and why.
// It never says they agree at a point it did not compare.
func (a *analysis) writeReconciliation(b *md) {
	var lines []string
	compared, points := 0, 0
	var noServer, noClient []string
	for _, m := range a.modes {
		for _, l := range a.levels {
			c := a.cell(m, l)
			if c == nil {
				continue
			}
			for i := range c.runs {
				r := &c.runs[i]
				points++
				at := fmt.Sprintf("run %d, %s at %d", r.Run, m, l)
				// A TSV without the requests column still has kv_hit_rate.
				client := r.Requests > 0 || !r.Measured("requests")
				switch {
				case !client:
					noClient = append(noClient, at)
				case r.ServerHitRate == nil:
					noServer = append(noServer, at)
				default:
					compared++
					if why := result.ServerReconciliation(r.HitRate, client, r.ServerHitRate); why != "" {
						lines = append(lines, fmt.Sprintf("Run %d, %s at %d sessions: %s.", r.Run, m, l, why))
					}
				}
			}
		}
	}
	tol := 100 * result.ReconcileTolerance
	switch {
	case compared == 0:
		b.p("Client- and server-side hit rates were not compared: %s.", notComparedWhy(noServer, noClient, points))
	case len(lines) == 0 && compared == points:
		b.p("Client- and server-side hit rates agree within %.0f points at every point.", tol)
	case len(lines) == 0:
		b.p("Client- and server-side hit rates agree within %.0f points at the %d of %d points where both were measured; the others were not compared: %s.",
			tol, compared, points, notComparedWhy(noServer, noClient, points))
	default:
		for _, line := range lines {
			b.WriteString("- " + line + "\n")
		}
		b.WriteString("\n")
		if compared < points {
			b.p("The other points were not compared: %s.", notComparedWhy(noServer, noClient, points))
		}
	}
}

// notComparedWhy says why points were left out of the hit-rate
// comparison: which side was not measured, at which points.
func notComparedWhy(noServer, noClient []string, points int) string {
	var why []string
	if n := len(noServer); n > 0 {
		why = append(why, fmt.Sprintf("the server-side hit rate was not measured at %s (no prefix-cache metric on the endpoints read, or no endpoint read; "+
			"result.json's server_missing says which)", pointsPhrase(noServer, points)))
	}
	if n := len(noClient); n > 0 {
		why = append(why, fmt.Sprintf("the client-side hit rate was not measured at %s (no successful request)", pointsPhrase(noClient, points)))
	}
	return strings.Join(why, "; ")
}

// pointsPhrase names the points, or says "every point" / "N points"
// when listing them would not help.
func pointsPhrase(at []string, points int) string {
	switch {
	case len(at) == points:
		return "any point"
	case len(at) <= 3:
		return strings.Join(at, "; ")
	}
	return fmt.Sprintf("%d of %d points", len(at), points)
}
