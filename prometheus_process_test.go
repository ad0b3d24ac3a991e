//go:build integration

package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/promtest"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
)

// nativeTolerance is how far the TTFT p95 Prometheus estimates from the
// native buckets may be from result.json's: a schema-3 bucket is 2^(1/8)
// ≈ 1.0905 times wide and the estimate lies in the bucket that holds the
// true quantile, so at most 9.05% off; HDR's reported p95 is the top of its
// 0.1% bucket. 10% covers both.
const nativeTolerance = 0.10

// classicSlack widens the classic bucket holding result.json's p95 at
// both ends: an HDR bucket is counted at its midpoint, so a value within
// 0.1% of a bound may sit on the other side of it.
const classicSlack = 0.005

// dashboardVars are the values the test gives the dashboard's variables:
// every mode, the measured phase (what result.json counts), and a rate
// interval covering the whole run, so a rate's quantile is the run's (but
// for the first scrape's counts and rate's extrapolation).
var dashboardVars = strings.NewReplacer("$__rate_interval", "10m", "$mode", ".*", "$phase", "measure")

// TestPrometheusScrapesARun: two real Prometheus servers, one with native
// histograms and one without, scrape `fleetbench run --agents 3` and the
// simulator it loads every second. Every query of the Grafana dashboard
// runs on both; the fleetbench and server panels return data; the TTFT p95
// through the dashboard's one query (native buckets on one, classic on the
// other) is result.json's within the native buckets' resolution, or
// within one classic bucket, and the final classic counts' p95 is in the
// bucket that holds result.json's; the request and token counters equal
// result.json's counts.
func TestPrometheusScrapesARun(t *testing.T) {
	bin := promtest.Binary(t)
	s := startSim(t)
	metricsAddr := freeAddr(t)
	targets := map[string]string{"fleetbench": metricsAddr, "sim": strings.TrimPrefix(s.URL(), "http://")}
	servers := []struct {
		name string
		srv  *promtest.Server
	}{
		{"native", promtest.Start(t, bin, promtest.Options{Targets: targets, Native: true})},
		{"classic", promtest.Start(t, bin, promtest.Options{Targets: targets})},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	out := t.TempDir()
	start := time.Now()
	run := startProc(t, ctx, "run", "", nil, nil, "--log-level", "warn", "run", "--agents", "3",
		"--target", s.URL(), "--model", "sim-model", "--api-key-env", "", "--concurrency", "12", "--warmup", "3s",
		"--duration", "15s", "--max-tokens", "64", "--percentiles", "95,99", "--label", "kv",
		"--metrics-listen", metricsAddr, "--out", out)
	if code := run.wait(t, 3*time.Minute); code != exitOK {
		t.Fatalf("%s", run)
	}
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	completed, _ := res["completed"].(float64)
	failed, _ := res["failed"].(float64)
	outputTokens, _ := res["total_output_tokens"].(float64)
	p95ms, _ := res["p95_ttft_ms"].(float64)
	if completed < 100 || p95ms <= 0 {
		t.Fatalf("result.json: %v completed, TTFT p95 %v ms; want at least a hundred requests:\n%s", completed, p95ms, run)
	}
	t.Logf("result.json: %v completed, %v failed, TTFT p95 %.2f ms", completed, failed, p95ms)
	p95 := p95ms / 1000
	now := time.Now()
	queries := dashboardQueries(t)

	for _, ps := range servers {
		t.Run(ps.name, func(t *testing.T) {
			srv := ps.srv
			query := func(expr string) []promtest.Sample {
				t.Helper()
				got, err := srv.Query(ctx, expr, now)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			one := func(expr string) float64 {
				t.Helper()
				got := query(expr)
				if len(got) != 1 {
					t.Fatalf("%s: %d series, want 1: %v", expr, len(got), got)
				}
				return got[0].Value
			}
			// Every query of every panel runs, as Grafana runs it: a range
			// over the run.
			for title, targets := range queries {
				hasData := false
				for _, q := range targets {
					got, err := srv.QueryRange(ctx, dashboardVars.Replace(q.Expr), start, now, time.Second)
					if err != nil {
						t.Errorf("panel %q, query %s: %v", title, q.RefID, err)
					}
					hasData = hasData || len(got) > 0
					if isQuantile(title) && len(got) == 0 {
						t.Errorf("panel %q, query %s returned nothing", title, q.RefID)
					}
				}
				if !hasData && title != "Errors" {
					t.Errorf("panel %q: no query returned data", title)
				}
			}
			// The TTFT p95. The dashboard's query takes rate() over the
			// run, which leaves out what the first scrape of the measured
			// phase already held and extrapolates each series by a factor
			// of its own, from its own first value. A native histogram is
			// one series, so its quantile moves by a fraction of a bucket;
			// classic buckets are one series each, so their quantile may
			// land one bucket away (once 78 ms against 57.6, when 95% of
			// the requests sat just under the 75 ms bound). The run's final
			// classic counts (the last scrape, by last_over_time, which in
			// Prometheus 2.42 keeps float samples only) are exactly
			// result.json's requests: their quantile must be in the bucket
			// that holds result.json's.
			var dash string
			for _, q := range queries["TTFT"] {
				if q.RefID == "p95" {
					dash = dashboardVars.Replace(q.Expr)
				}
			}
			nativeHalf := len(query(`histogram_quantile(0.95, sum(rate(fleetbench_ttft_seconds{phase="measure"}[10m])))`)) > 0
			final := `histogram_quantile(0.95, sum by (le) (last_over_time(fleetbench_ttft_seconds_bucket{phase="measure"}[10m])))`
			if ps.name == "native" {
				final = dash
			}
			got, gotDash := one(final), one(dash)
			if ps.name == "native" {
				if !nativeHalf {
					t.Error("the native server has no native TTFT histogram")
				}
				if math.Abs(gotDash-p95) > nativeTolerance*p95 {
					t.Errorf("TTFT p95 from the dashboard's query on native buckets %.2f ms, result.json %.2f ms: off by %.1f%%, tolerance %.0f%%",
						gotDash*1000, p95ms, 100*math.Abs(gotDash-p95)/p95, 100*nativeTolerance)
				}
			} else {
				if nativeHalf {
					t.Error("the classic server has a native TTFT histogram")
				}
				lo, hi := classicBucket(loadmetrics.TTFTBuckets, p95)
				if got < lo*(1-classicSlack) || got > hi*(1+classicSlack) {
					t.Errorf("TTFT p95 from the final classic buckets %.2f ms, outside the bucket (%g, %g] s that holds result.json's %.2f ms",
						got*1000, lo, hi, p95ms)
				}
				wlo, whi := neighbours(loadmetrics.TTFTBuckets, p95)
				if gotDash < wlo*(1-classicSlack) || gotDash > whi*(1+classicSlack) {
					t.Errorf("TTFT p95 from the dashboard's query %.2f ms, outside (%g, %g] s, the bucket that holds result.json's %.2f ms and its neighbours",
						gotDash*1000, wlo, whi, p95ms)
				}
			}
			t.Logf("%s: TTFT p95 from the final buckets %.2f ms, from the dashboard's query %.2f ms, result.json %.2f ms (%+.1f%%, %+.1f%%)",
				ps.name, got*1000, gotDash*1000, p95ms, 100*(got-p95)/p95, 100*(gotDash-p95)/p95)
			// Counters: last_over_time reads the final scrape's values
			// (the process is gone, so its series are stale now).
			sel := `{phase="measure"}[10m]`
			if n := one(`sum(last_over_time(fleetbench_requests_total` + sel + `))`); n != completed+failed {
				t.Errorf("fleetbench_requests_total{phase=measure} %v, result.json %v completed + %v failed", n, completed, failed)
			}
			if n := one(`sum(last_over_time(fleetbench_requests_total{phase="measure", outcome="ok"}[10m]))`); n != completed {
				t.Errorf("fleetbench_requests_total{outcome=ok} %v, result.json completed %v", n, completed)
			}
			if n := one(`sum(last_over_time(fleetbench_output_tokens_total` + sel + `))`); n != outputTokens {
				t.Errorf("fleetbench_output_tokens_total %v, result.json total_output_tokens %v", n, outputTokens)
			}
			if n := len(query(`last_over_time(fleetbench_agent_reports_sent_total[10m])`)); n != 3 {
				t.Errorf("%d agents' report counters, want 3", n)
			}
		})
	}
}

// isQuantile reports whether a panel's every query is a fleetbench
// latency quantile, which must return data.
func isQuantile(title string) bool {
	switch title {
	case "TTFT", "ITL", "TPOT", "E2E", "Schedule lag":
		return true
	}
	return false
}

// classicBucket returns the classic bucket (lo, hi] that holds v.
func classicBucket(bounds []float64, v float64) (lo, hi float64) {
	i := sort.SearchFloat64s(bounds, v)
	if i == len(bounds) {
		return bounds[i-1], math.Inf(1)
	}
	if i > 0 {
		lo = bounds[i-1]
	}
	return lo, bounds[i]
}

// neighbours returns the classic buckets around the one that holds v, as
// one range: from the lower bound of the bucket below to the upper bound
// of the bucket above.
func neighbours(bounds []float64, v float64) (lo, hi float64) {
	i := sort.SearchFloat64s(bounds, v)
	if i >= 2 {
		lo = bounds[i-2]
	}
	if i+1 >= len(bounds) {
		return lo, math.Inf(1)
	}
	return lo, bounds[i+1]
}
