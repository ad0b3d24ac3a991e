package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/report"
)

// TestSweepScrapesSimulator sweeps the built-in simulator while reading
// its own /metrics (scrape: {urls: [sim]}): in both modes the server-side
// hit rate (its prefix-cache counters) is within 1 point of the client's
// (usage), the worker skew is measured, and near 1 under round robin.
func TestSweepScrapesSimulator(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// Longer windows than the other end-to-end sweep's: the two sides
	// count a turn at different moments (the client when it is sent, the
	// server when it is scheduled), so the turns that straddle a window's
	// edges weigh less.
	sw := strings.Replace(e2eSweep, "measure: 2s", "measure: 6s", 1)
	spec := writeSweepFile(t, dir, sw+"scrape: {urls: [sim], interval: 500ms}\n")
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", spec, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	header, rows := sweepTSV(t, out)
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	num := func(r []string, name string) float64 {
		t.Helper()
		i, ok := col[name]
		if !ok || i >= len(r) || r[i] == "" {
			t.Fatalf("row %v: no %s", r[:2], name)
		}
		v, err := strconv.ParseFloat(r[i], 64)
		if err != nil {
			t.Fatalf("row %v: %s %q", r[:2], name, r[i])
		}
		return v
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, r := range rows {
		client, server := num(r, "kv_hit_rate"), num(r, "server_hit_rate")
		if math.Abs(client-server) > 0.01 {
			t.Errorf("%s at %s: client-side hit rate %.4f, server-side %.4f: more than 1 point apart", r[0], r[1], client, server)
		}
		skew := num(r, "worker_skew")
		if skew < 1 || (r[0] == "round_robin" && skew > 1.3) {
			t.Errorf("%s at %s: worker skew %.3f", r[0], r[1], skew)
		}
		_ = num(r, "queue_max")
		_ = num(r, "kv_usage_max")
		if i := col["spec_accept_rate"]; i < len(r) && r[i] != "" {
			t.Errorf("%s at %s: spec_accept_rate %q, want empty (the simulator drafts nothing)", r[0], r[1], r[i])
		}
		t.Logf("%s at %s: client hit rate %.4f, server %.4f, worker skew %.3f", r[0], r[1], client, server, num(r, "worker_skew"))
	}
	md, err := os.ReadFile(filepath.Join(out, report.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Server-side metrics", "Client- and server-side hit rates agree within 3 points at every point."} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
}

// TestRunScrapesSimulator runs one level with --scrape sim: the block has
// a Server-side section and result.json the server's hit rate, equal to
// the client's within a point.
func TestRunScrapesSimulator(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "run", "--concurrency", "8", "--warmup", "500ms",
		"--duration", "2s", "--sim-time-scale", "20", "--sim-replicas", "2", "--max-tokens", "64",
		"--prompt-tokens", "500", "--scrape", "sim", "--scrape-interval", "500ms", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, s := range []string{"-Server-side-", "Server KV cache hit rate (%):", "Worker skew (max/mean requests):", "Spec. decode acceptance (%):             n/a"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	res := readResult(t, dir)
	client, ok1 := res["kv_hit_rate"].(float64)
	server, ok2 := res["server_hit_rate"].(float64)
	if !ok1 || !ok2 || math.Abs(client-server) > 0.01 {
		t.Errorf("result.json kv_hit_rate %v, server_hit_rate %v", res["kv_hit_rate"], res["server_hit_rate"])
	}
	if v, ok := res["spec_accept_rate"]; !ok || v != nil {
		t.Errorf("spec_accept_rate %v (present %v), want null", v, ok)
	}
}

// TestScrapeUsageErrors checks --scrape's values before anything starts.
func TestScrapeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"sim with a target", []string{"run", "--target", "http://127.0.0.1:1", "--model", "m", "--concurrency", "1", "--scrape", "sim", "--out", dir}, "in-process simulator"},
		{"not a URL", []string{"run", "--concurrency", "1", "--scrape", "vllm:8000", "--out", dir}, "want an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCommand(t.Context(), tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestWorkersFromResponseHeader: the simulator names the worker of each
// response; with two agents the per-worker counts travel in the agents'
// reports, and round robin spreads the requests evenly over its four
// workers (skew near 1), as result.json and the block say, and as the
// simulator's own per-worker counters (read with --scrape sim) say too.
func TestWorkersFromResponseHeader(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "--log-level", "error", "run", "--concurrency", "8", "--agents", "2",
		"--warmup", "1s", "--duration", "3s", "--sim-time-scale", "20", "--sim-router", "round_robin", "--max-tokens", "16",
		"--scrape", "sim", "--scrape-interval", "500ms", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResult(t, dir)
	per, _ := res["client_requests_per_worker"].(map[string]any)
	var total float64
	for _, v := range per {
		total += v.(float64)
	}
	skew, _ := res["client_worker_skew"].(float64)
	if len(per) != 4 || total != res["completed"].(float64) || skew < 1 || skew > 1.3 {
		t.Errorf("client_requests_per_worker %v (completed %v), skew %v", per, res["completed"], res["client_worker_skew"])
	}
	// The simulator's own per-worker counters say the same, up to the
	// turns that straddle the window's edges.
	server, _ := res["server_requests_per_worker"].(map[string]any)
	for name, v := range per {
		sv, ok := server[name].(float64)
		if d := sv - v.(float64); !ok || d > 3 || d < -3 {
			t.Errorf("worker %s: %v requests by the response header, %v by the simulator's counters", name, v, server[name])
		}
	}
	if !strings.Contains(stdout, "Workers (response header)") {
		t.Errorf("the block lacks the workers section:\n%s", stdout)
	}
}
