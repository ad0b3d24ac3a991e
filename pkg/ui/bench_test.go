package ui

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// runCores3200 is what a 3,200-session run costs on the machine `make
// bench` measures (BenchmarkClosedLoop at 3,200 sessions of 20 tokens/s:
// 0.23 cores per 1,000 streams), the base the live view's share is taken
// of.
const runCores3200 = 0.23 * 3.2

// BenchmarkLiveSecond is one second of a 3,200-session run with the
// dashboard open and Prometheus scraping every second: 4 agents' reports
// of that second (2,900 turns of 20 tokens, as the ClosedLoop benchmark's
// server streams them) fed to the page's feed and the load metrics, one
// snapshot for the page's event stream encoded as JSON, and one scrape of
// /metrics. It prints the CPU time per second of run and its share of
// the run's own CPU (runCores3200); the budget is 2%.
func BenchmarkLiveSecond(b *testing.B) {
	const agents, turnsPerSecond, tokens = 4, 2900, 20
	rng := rand.New(rand.NewPCG(1, 2))
	reports := make([]*record.Window, agents)
	for i := range reports {
		w := record.NewWindow(1, hdr.Default)
		for range turnsPerSecond / agents {
			ttft := time.Duration(100+rng.IntN(20)) * time.Millisecond
			w.Hist[record.TTFT].Record(ttft)
			w.Hist[record.TTFB].Record(ttft)
			for range tokens - 1 {
				w.Hist[record.ITL].Record(time.Duration(48+rng.IntN(5)) * time.Millisecond)
			}
			w.Hist[record.TPOT].Record(50 * time.Millisecond)
			w.Hist[record.E2E].Record(ttft + 19*50*time.Millisecond)
			w.Hist[record.Lag].Record(time.Duration(rng.IntN(500)) * time.Microsecond)
			w.Hist[record.TTFTIntended].Record(ttft)
			w.Hist[record.E2EIntended].Record(ttft + 19*50*time.Millisecond)
		}
		w.Counters.Requests = turnsPerSecond / agents
		w.Counters.OutputTokens = turnsPerSecond / agents * tokens
		reports[i] = w
	}
	reg := prometheus.NewRegistry()
	load, err := loadmetrics.NewLoad(reg)
	if err != nil {
		b.Fatal(err)
	}
	feed := NewFeed()
	lb := loadmetrics.Labels{Mode: "kv", Level: 3200, Phase: loadmetrics.PhaseMeasure}
	feed.SetStage(lb, 3200)
	load.Touch(lb)
	now := time.Unix(1_700_000_000, 0)
	feed.now = func() time.Time { return now }
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		now = now.Add(time.Second)
		for _, w := range reports {
			feed.Add(w, lb)
			load.Add(w, lb)
		}
		if _, err := json.Marshal(feed.Snapshot(now)); err != nil {
			b.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
	perSecond := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(perSecond.Microseconds()), "µs/s-of-run")
	b.ReportMetric(100*perSecond.Seconds()/runCores3200, "%-of-run-cpu")
}
