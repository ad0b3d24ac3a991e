package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
)

// writeSweepFile writes a sweep file into dir and returns its path.
func writeSweepFile(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "sweep.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sweepTSV returns the header and rows of the sweep TSV in dir.
func sweepTSV(t *testing.T, dir string) (header []string, rows [][]string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "benchmark-sweep-*.tsv"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("sweep TSVs in %s: %v %v", dir, paths, err)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if header == nil {
			header = fields
			continue
		}
		rows = append(rows, fields)
	}
	return header, rows
}

// The demo's simulator settings at a smaller scale: four replicas with a
// small KV cache, where round robin misses the cache that KV routing hits.
// Latencies on a loaded test machine (and under -race) are not the
// simulator's, so the SLA is one both modes meet: the test checks the
// report's SLA table and headline, not where the breakpoints fall (the
// demo shows that).
const e2eSweep = `
workload:
  kind: docchat
  prompt_tokens: 1600
  turns: 3-5
  max_tokens: 32
  think_time: none
  seed: 7
levels: [4, 8]
modes: [{name: kv}, {name: round_robin}]
baseline: round_robin
candidate: kv
warmup: 1s
measure: 2s
snapshots: 2
cooldown: 100ms
sla: 10s
fallback_sla: 10s
switch_estimate: 1s
agents: 2
sim:
  time_scale: 10
  replicas: 4
  kv_blocks: 400
`

func TestSweepEndToEndAgainstSimulator(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSweepFile(t, dir, e2eSweep)
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", spec, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	header, rows := sweepTSV(t, out)
	if got := strings.Join(header[:len(report.LeadingColumns)], ","); got != strings.Join(report.LeadingColumns, ",") {
		t.Errorf("leading columns %s, want %s", got, strings.Join(report.LeadingColumns, ","))
	}
	// Rows in plan order: every level of kv, then every level of round
	// robin; closed loop (rps 0); a measurement window of about 2 s.
	want := [][2]string{{"kv", "4"}, {"kv", "8"}, {"round_robin", "4"}, {"round_robin", "8"}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%v", len(rows), len(want), rows)
	}
	hit := map[string]float64{}
	for i, r := range rows {
		if r[0] != want[i][0] || r[1] != want[i][1] || r[2] != "0.000" {
			t.Errorf("row %d begins %v, want %v and rps 0.000", i, r[:3], want[i])
		}
		start, err1 := time.Parse(report.TimeLayout, r[9])
		end, err2 := time.Parse(report.TimeLayout, r[10])
		if err1 != nil || err2 != nil || end.Sub(start) < time.Second || end.Sub(start) > 4*time.Second {
			t.Errorf("row %d measure window %s..%s (%v %v)", i, r[9], r[10], err1, err2)
		}
		h, err := strconv.ParseFloat(r[5], 64)
		if err != nil {
			t.Errorf("row %d: kv_hit_rate %q", i, r[5])
		}
		hit[r[0]] += h / 2
		if r[6] != "0.0000" {
			t.Errorf("row %d: error_pct %s", i, r[6])
		}
	}
	if hit["kv"] <= hit["round_robin"] {
		t.Errorf("mean kv hit rate %.3f, round robin %.3f: want kv higher", hit["kv"], hit["round_robin"])
	}

	md, err := os.ReadFile(filepath.Join(out, report.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Headline", "## SLA breakpoints", "| kv |", "| round_robin |"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
	for _, s := range []string{"Report:  " + filepath.Join(out, report.ReportFile), "SLA breakpoint (highest level with TTFT p95 <= 10s): kv 8, round_robin 8",
		"Both kv and round_robin stay under the SLA (TTFT p95 ≤ 10000 ms) up to 8 sessions, the highest level tested: no breakpoint in range. At 8 sessions kv against round_robin: TTFT p50 ", "2 switches; mode kv restored"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	// The simulator itself saw the switches: kv, round_robin, then kv again
	// to restore the mode it had.
	var modes []string
	for line := range strings.Lines(stderr) {
		if strings.Contains(line, "sim: routing mode changed") {
			_, m, _ := strings.Cut(strings.TrimSpace(line), "mode=")
			modes = append(modes, m)
		}
	}
	if strings.Join(modes, ",") != "kv,round_robin,kv" {
		t.Errorf("simulator mode changes %v, want kv, round_robin, kv", modes)
	}
	// The spec is kept for --resume, without the simulator's address.
	if b, err := os.ReadFile(filepath.Join(out, runner.SpecFile)); err != nil || !strings.Contains(string(b), "kv_blocks: 400") || strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("kept spec (%v):\n%s", err, b)
	}
}

const resumeSweep = `
workload:
  prompt_tokens: 400
  turns: 2
  max_tokens: 16
levels: [2, 4]
modes: [{name: kv}, {name: round_robin}]
switch:
  kind: exec
  command: [sh, -c, 'echo "$FLEETBENCH_MODE" >> SWITCHLOG']
warmup: 300ms
measure: 1s
snapshots: 1
cooldown: 0s
switch_estimate: 1s
agents: 2
readiness:
  skip: true
sim:
  time_scale: 20
`

func TestSweepResumeAfterInterrupt(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	switchLog := filepath.Join(dir, "switches.log")
	spec := writeSweepFile(t, dir, strings.ReplaceAll(resumeSweep, "SWITCHLOG", switchLog))

	// Interrupt as soon as the first level's row is in the TSV.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				paths, _ := filepath.Glob(filepath.Join(out, "benchmark-sweep-*.tsv"))
				if len(paths) == 1 {
					if b, _ := os.ReadFile(paths[0]); strings.Count(string(b), "\n") >= 2 {
						cancel()
						return
					}
				}
			}
		}
	}()
	code, stdout, stderr := runCommand(ctx, "sweep", "-f", spec, "--out", out)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, stdout, stderr)
	}
	if !strings.Contains(stdout, "Resume with: fleetbench sweep --resume "+out) {
		t.Errorf("stdout:\n%s", stdout)
	}
	_, rows := sweepTSV(t, out)
	if len(rows) != 1 || rows[0][0] != "kv" || rows[0][1] != "2" {
		t.Fatalf("rows after the interrupt: %v", rows)
	}

	// Dry run of the resumed sweep: one point done.
	code, stdout, stderr = runCommand(t.Context(), "sweep", "--resume", out, "--dry-run")
	if code != exitOK || !strings.Contains(stdout, "1 done, 3 to run") || !strings.Contains(stdout, "switches: 2") {
		t.Errorf("dry run exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = runCommand(t.Context(), "sweep", "--resume", out)
	if code != exitOK {
		t.Fatalf("resume exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	_, rows = sweepTSV(t, out)
	seen := map[string]int{}
	for _, r := range rows {
		seen[r[0]+" "+r[1]]++
	}
	for _, k := range []string{"kv 2", "kv 4", "round_robin 2", "round_robin 4"} {
		if seen[k] != 1 {
			t.Errorf("%s measured %d times, want once (rows %v)", k, seen[k], rows)
		}
	}
	if len(rows) != 4 {
		t.Errorf("%d rows, want 4", len(rows))
	}
	if !strings.Contains(stdout, "3 points measured") {
		t.Errorf("stdout:\n%s", stdout)
	}
	// kv before the interrupt; kv again (its block still had a level) and
	// round_robin after it. The exec switch cannot read the mode, so
	// nothing is restored.
	b, err := os.ReadFile(switchLog)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, ",") != "kv,kv,round_robin" {
		t.Errorf("switches %v, want kv, kv, round_robin", got)
	}
	if _, err := os.Stat(filepath.Join(out, report.ReportFile)); err != nil {
		t.Errorf("no report after the resume: %v", err)
	}
	// A new sweep does not write into the finished one.
	code, _, stderr = runCommand(t.Context(), "sweep", "-f", spec, "--out", out)
	if code != exitError || !strings.Contains(stderr, "already holds a sweep") {
		t.Errorf("second sweep into %s: exit %d\n%s", out, code, stderr)
	}
}

func TestSweepDryRun(t *testing.T) {
	dir := t.TempDir()
	spec := writeSweepFile(t, dir, e2eSweep)
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", spec, "--out", filepath.Join(dir, "out"), "--runs", "2", "--dry-run")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, s := range []string{
		"target: the built-in simulator (llama-3.1-70b-fp8-h100-tp2, time scale 10)",
		"sweep plan: 2 runs x 2 modes (kv, round_robin) x 2 levels (4,8) = 8 points",
		"switch to round_robin, gate, prime",
		"warmup 1s, measure 2s (2 snapshots of 1s), cooldown 0s",
		"switches: 4",
		"estimated duration: 29s",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a dry run created the output directory: %v", err)
	}
}

func TestSweepUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"no levels", "modes: [{name: kv}]\noutput: x\n", nil, "levels are required"},
		{"unknown field", "levls: [1]\n", nil, `unknown field "levls"`},
		{"unknown sim field", "levels: [1]\nsim: {scale: 3}\n", nil, `unknown field "scale" in sim`},
		{"bad profile", "levels: [1]\nmodes: [{name: kv}]\noutput: x\n", []string{"--sim-profile", "nope"}, `profile "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCommand(t.Context(), append([]string{"sweep", "-f", path}, tt.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d with %q; stderr:\n%s", code, exitUsage, tt.want, stderr)
			}
		})
	}
}

// TestDemoSweepFile checks that the committed demo spec is valid and plans
// a KV-versus-round-robin sweep of at least 3 levels that fits in about
// three minutes (1 to 3 minutes planned).
func TestDemoSweepFile(t *testing.T) {
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", "deploy/examples/demo-sweep.yaml", "--dry-run")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "x 2 modes (kv, round_robin) x 4 levels") || !strings.Contains(stdout, "time scale 10") ||
		!regexp.MustCompile(`estimated duration: [123]m`).MatchString(stdout) {
		t.Errorf("demo plan:\n%s", stdout)
	}
}

// switchStartsServer is a sweep whose exec switch is what brings the
// server up: it leaves STARTED, and the test starts the server on TARGET
// once it appears, as a switch that (re)starts a model server would.
const switchStartsServer = `
target: http://TARGET
model: m
workload:
  prompt_tokens: 300
  turns: 2
  max_tokens: 8
levels: [2]
modes: [{name: only}]
switch:
  kind: exec
  command: [sh, -c, 'touch STARTED; sleep 0.3']
warmup: 0s
measure: 1s
snapshots: 1
cooldown: 0s
switch_estimate: 1s
agents: 1
readiness:
  skip: true
`

// TestSweepPreflightAfterFirstSwitch: with nothing listening before the
// sweep, a sweep whose switch starts the server succeeds: its preflight
// checks the target after the first switch, not before it.
func TestSweepPreflightAfterFirstSwitch(t *testing.T) {
	dir := t.TempDir()
	addr := testserve.FreeAddr(t)
	started := filepath.Join(dir, "started")
	spec := writeSweepFile(t, dir, strings.NewReplacer("TARGET", addr, "STARTED", started).Replace(switchStartsServer))
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})}
	defer srv.Close()
	served := make(chan error, 1)
	go func() {
		for {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			served <- err
			return
		}
		served <- nil
		_ = srv.Serve(l)
	}()
	start := time.Now()
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", spec, "--out", filepath.Join(dir, "out"))
	if code != exitOK {
		t.Fatalf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(start), stdout, stderr)
	}
	if err := <-served; err != nil {
		t.Fatalf("start the server after the switch: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the sweep waited for the target", took)
	}
	if _, rows := sweepTSV(t, filepath.Join(dir, "out")); len(rows) != 1 {
		t.Errorf("rows %v, want the one level", rows)
	}
}

// failFastSweep is a sweep whose every request fails the same way.
const failFastSweep = `
target: TARGET
model: m
skip_preflight: true
fail_fast: 500ms
workload:
  prompt_tokens: 300
  turns: 2
  max_tokens: 8
levels: [2]
modes: [{name: only}]
switch:
  kind: none
warmup: 0s
measure: 1m
snapshots: 1
cooldown: 0s
agents: 1
readiness:
  skip: true
`

// TestSweepFailFastKeepsLevel: a sweep level that fail-fast stops (every
// stream carries a coded 400 error object) leaves stopped.json in the
// output directory, marked stopped, with the server's whole message.
func TestSweepFailFastKeepsLevel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"error\": {\"message\": %q, \"type\": \"BadRequestError\", \"code\": 400}}\n\n", contextLengthMessage)
	}))
	defer srv.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := writeSweepFile(t, dir, strings.ReplaceAll(failFastSweep, "TARGET", srv.URL))
	code, stdout, stderr := runCommand(t.Context(), "--log-level", "error", "sweep", "-f", spec, "--out", out)
	if code != exitAllFailed || !strings.Contains(stderr, contextLengthMessage) {
		t.Fatalf("exit %d, want %d with the whole message\nstdout:\n%s\nstderr:\n%s", code, exitAllFailed, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "stopped.json"))
	if err != nil {
		t.Fatalf("read stopped.json: %v\nstdout:\n%s", err, stdout)
	}
	var res struct {
		Stopped     string `json:"stopped"`
		Interrupted bool   `json:"interrupted"`
		TopErrors   []struct {
			Class, Example string
		} `json:"top_errors"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || !strings.Contains(res.Stopped, "all bad_request") || len(res.TopErrors) == 0 ||
		res.TopErrors[0].Class != "bad_request" || res.TopErrors[0].Example != contextLengthMessage {
		t.Errorf("stopped.json: %s", b)
	}
}
