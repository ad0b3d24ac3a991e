package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

func fptr(v float64) *float64 { return &v }

// TestLeadingOnlyTSVSaysNA renders a report from TSVs with only the 11
// leading columns: the figures they lack (later turns' hit rate, output
// throughput, TPOT, ...) are "n/a", never 0.
func TestLeadingOnlyTSVSaysNA(t *testing.T) {
	dir := t.TempDir()
	in := strings.Join(LeadingColumns, "\t") + "\n" +
		"round_robin\t20\t0\t0.1\t0.2\t0.3\t0\t3.2\t100\t2025-01-01T00:00:00Z\t2025-01-01T00:05:00Z\n" +
		"round_robin\t40\t0\t0.1\t0.5\t0.3\t0\t3.2\t100\t2025-01-01T00:05:00Z\t2025-01-01T00:10:00Z\n" +
		"kv\t20\t0\t0.05\t0.1\t0.8\t0\t3.3\t110\t2025-01-01T00:10:00Z\t2025-01-01T00:15:00Z\n" +
		"kv\t40\t0\t0.05\t0.2\t0.8\t0\t3.3\t110\t2025-01-01T00:15:00Z\t2025-01-01T00:20:00Z\n"
	p := filepath.Join(dir, "old.tsv")
	if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(t.TempDir(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.Report)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, bad := range []string{"later turns: 0.0% against 0.0%", "0.0 output tok/s", "output throughput 0.0 against", "Server-side metrics"} {
		if strings.Contains(md, bad) {
			t.Errorf("report.md says %q for a figure not measured", bad)
		}
	}
	for _, want := range []string{"later turns: n/a", "output tok/s: n/a", "| 20 | n/a | n/a | n/a | n/a |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// baseline.json leaves the figures out rather than writing 0.
	bj, err := os.ReadFile(r.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"output_tps"`, `"tpot_p50_ms"`, `"e2e_p95_ms"`} {
		if strings.Contains(string(bj), key) {
			t.Errorf("baseline.json has %s for a figure not measured", key)
		}
	}
	if !strings.Contains(string(bj), `"ttft_p95_ms": 200`) {
		t.Errorf("baseline.json lacks the measured TTFT:\n%s", bj)
	}
	row := s.Points[0].Row
	if row.Measured("later_hit_rate") || row.Measured("output_tps") || !row.Measured("kv_hit_rate") {
		t.Errorf("Measured: later_hit_rate %v output_tps %v kv_hit_rate %v; want false false true",
			row.Measured("later_hit_rate"), row.Measured("output_tps"), row.Measured("kv_hit_rate"))
	}
}

// TestServerFigures carries a scraped point's server window through the
// TSV, point.json, report.md and baseline.json: figures measured are
// written, those not measured are empty cells, "n/a" and absent keys, and
// a hit rate that disagrees with the client's is flagged.
func TestServerFigures(t *testing.T) {
	s := goldenSweep()
	for i := range s.Points {
		p := &s.Points[i]
		p.Server = &servermetrics.Window{
			Start: p.MeasureStart, End: p.MeasureEnd,
			Total: servermetrics.Figures{HitRate: fptr(p.Window.HitRate()), QueueMean: fptr(1.5), QueueMax: fptr(4),
				KVUsageMax: fptr(0.25), Preemptions: fptr(0)},
			Endpoints: []servermetrics.EndpointWindow{{Endpoint: "http://sim/metrics"}},
			Workers:   servermetrics.WorkerCounts{"w0": {Requests: 10}, "w1": {Requests: 30}},
		}
		p.Server.Balance = p.Server.Workers.Balance()
	}
	// One point whose server saw far more cache hits than usage says.
	s.Points[0].Server.Total.HitRate = fptr(0.9)
	dir := t.TempDir()
	writeSweep(t, dir, s)

	rows, err := ReadTSV(filepath.Join(dir, TSVName(s.ID)))
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if r.ServerHitRate == nil || *r.ServerHitRate != 0.9 || r.QueueMax == nil || *r.QueueMax != 4 || r.Preemptions == nil || *r.Preemptions != 0 ||
		r.WorkerSkew == nil || *r.WorkerSkew != 1.5 || r.SpecAcceptRate != nil {
		t.Errorf("TSV row server figures: hit %v queue max %v preemptions %v skew %v spec %v",
			r.ServerHitRate, r.QueueMax, r.Preemptions, r.WorkerSkew, r.SpecAcceptRate)
	}

	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range loaded.Points {
		if p.Server == nil || p.Server.Total.QueueMean == nil || *p.Server.Total.QueueMean != 1.5 {
			t.Fatalf("run %d %s %d: server window not read back from point.json: %+v", p.Run, p.Mode, p.Level, p.Server)
		}
	}

	out := t.TempDir()
	rr, err := Render(out, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(rr.Report)
	md := string(b)
	// The server-side chart is drawn and linked.
	if !slices.ContainsFunc(rr.Charts, func(c string) bool { return filepath.Base(c) == ChartServerHitRate }) ||
		!strings.Contains(md, "("+ChartServerHitRate+")") {
		t.Errorf("charts %v: want %s, linked from report.md", rr.Charts, ChartServerHitRate)
	}
	p0 := s.Points[0]
	for _, want := range []string{"## Server-side metrics", "spec. acceptance (%)", "n/a", "other traffic",
		"Run 1, " + p0.Mode} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var bl struct {
		ByLevel map[string]map[string]map[string]any `json:"by_level"`
	}
	bj, err := os.ReadFile(filepath.Join(out, BaselineFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(bj, &bl); err != nil {
		t.Fatal(err)
	}
	for lvl, modes := range bl.ByLevel {
		for m, f := range modes {
			if f["queue_max"] != 4.0 || f["kv_usage_max_pct"] != 25.0 || f["worker_skew"] != 1.5 {
				t.Errorf("baseline %s %s: %v", lvl, m, f)
			}
			if _, ok := f["spec_accept_rate_pct"]; ok {
				t.Errorf("baseline %s %s has spec_accept_rate_pct, which was not measured", lvl, m)
			}
		}
	}
}
