package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/internal/wire"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// quietCLI is a cli whose commands can be built and parsed without
// running.
func quietCLI() *cli { return &cli{stdout: io.Discard, stderr: io.Discard} }

// workloads returns the workload each of run, coordinator and sweep builds
// from the same settings: as flags for run and coordinator, as a sweep
// file's workload section for sweep.
func workloads(t *testing.T, args []string, file string) map[string]workload.Config {
	t.Helper()
	got := map[string]workload.Config{}

	runCmd, ro := quietCLI().newRun()
	if err := runCmd.ParseFlags(append([]string{"--out", "o", "--concurrency", "4"}, args...)); err != nil {
		t.Fatal(err)
	}
	rc, err := ro.config(runCmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	got["run"] = rc.Workload

	coCmd, co := quietCLI().newCoordinator()
	if err := coCmd.ParseFlags(append([]string{"--target", "http://t:8000", "--model", "m"}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := co.config(coCmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	// What an agent builds from: the spec after the wire.
	got["coordinator"] = wire.WorkloadFromProto(wire.WorkloadToProto(cfg.Spec.Workload))

	path := filepath.Join(t.TempDir(), "sweep.yaml")
	spec := "levels: [4]\nmodes: [{name: kv}]\noutput: " + filepath.Join(t.TempDir(), "out") + "\n" + file
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	swCmd, so := quietCLI().newSweep()
	if err := swCmd.ParseFlags([]string{"-f", path}); err != nil {
		t.Fatal(err)
	}
	s, err := so.spec(swCmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	got["sweep"] = s.Workload
	return got
}

// TestSameWorkloadEverywhere builds one workload from run flags,
// coordinator flags (through the wire, as agents receive it) and a sweep
// file, and checks they are the same configuration and send the same
// conversations: same turns, same token counts, for the same seed. With no
// setting at all the three defaults agree too.
func TestSameWorkloadEverywhere(t *testing.T) {
	tests := []struct {
		name string
		args []string
		file string
	}{
		{"defaults", nil, ""},
		{"docchat", []string{"--seed", "11", "--turns", "2-4", "--prompt-tokens", "900", "--documents", "3",
			"--max-tokens", "64", "--think-time", "exp:1s", "--session-header", "X-Session-ID"},
			"workload:\n  seed: 11\n  turns: 2-4\n  prompt_tokens: 900\n  documents: 3\n  max_tokens: 64\n" +
				"  think_time: exp:1s\n  session_header: X-Session-ID\n"},
		{"docchat natural stop", []string{"--seed", "11", "--natural-stop", "--max-tokens", "2000"},
			"workload:\n  seed: 11\n  natural_stop: true\n  max_tokens: 2000\n"},
		{"sharegpt", []string{"--workload", "sharegpt", "--dataset", sampleShareGPT, "--seed", "3", "--max-conversations", "2"},
			"workload:\n  kind: sharegpt\n  dataset: " + sampleShareGPT + "\n  seed: 3\n  max_conversations: 2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := workloads(t, tt.args, tt.file)
			if !reflect.DeepEqual(got["run"], got["coordinator"]) || !reflect.DeepEqual(got["run"], got["sweep"]) {
				t.Fatalf("workloads differ:\n run         %+v\n coordinator %+v\n sweep       %+v", got["run"], got["coordinator"], got["sweep"])
			}
			// The same configuration is the same conversations: compare
			// them anyway, as a user would see them.
			var first []string
			for _, cmd := range []string{"run", "coordinator", "sweep"} {
				src, err := workload.New(got[cmd], nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				var seen []string
				for i := range 3 {
					conv := src.Conversation(i)
					hist := []openai.Message{{Role: openai.RoleSystem, Content: conv.System()}}
					for k := range conv.Turns() {
						turn, err := conv.Next(t.Context(), k, hist)
						if err != nil {
							t.Fatal(err)
						}
						seen = append(seen, fmt.Sprintf("%s (max_tokens %d)", turn.User, turn.MaxTokens))
						// A natural stop sends the cap alone; otherwise docchat
						// asks for a drawn length at or below it.
						if w := got[cmd]; w.NaturalStop && turn.MaxTokens != w.MaxTokens {
							t.Errorf("%s: natural stop sends max_tokens %d, want the cap %d", cmd, turn.MaxTokens, w.MaxTokens)
						}
						hist = append(hist, openai.Message{Role: "user", Content: turn.User}, openai.Message{Role: "assistant", Content: "ok"})
					}
				}
				if first == nil {
					first = seen
				} else if !reflect.DeepEqual(first, seen) {
					t.Errorf("%s sends other conversations than run", cmd)
				}
			}
		})
	}
	// The defaults themselves, named: what a user reads in -h.
	d := workloads(t, nil, "")["run"]
	if d.Seed != 0 || d.MaxTokens != 1024 || d.Kind != workload.KindDocChat || !d.Turns.IsZero() {
		t.Errorf("defaults %+v, want seed 0, max tokens 1024, docchat, the kind's turns", d)
	}
}

// sampleShareGPT is a small ShareGPT file of the workload package's tests.
const sampleShareGPT = "pkg/workload/testdata/sharegpt_sample.json"

// TestSharedFlagsSameEverywhere: every shared flag has the same default
// and help in run, coordinator and sweep.
func TestSharedFlagsSameEverywhere(t *testing.T) {
	runCmd, _ := quietCLI().newRun()
	coCmd, _ := quietCLI().newCoordinator()
	swCmd, _ := quietCLI().newSweep()
	shared := []string{"endpoint", "api-key-env", "workload", "dataset", "seed", "max-tokens", "think-time", "turns",
		"session-header", "prompt-tokens", "documents", "natural-stop", "max-conversations", "min-messages", "shuffle", "output-len",
		"user-model-url", "user-model", "user-model-key-env", "request-rate", "warmup", "duration",
		"goodput", "threshold", "abort-on-fail", "fail-fast", "skip-preflight", "ui-baseline"}
	for _, name := range shared {
		var want *pflag.Flag
		for cmd, fs := range map[string]*pflag.FlagSet{"run": runCmd.Flags(), "coordinator": coCmd.Flags(), "sweep": swCmd.Flags()} {
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("%s has no --%s", cmd, name)
				continue
			}
			if want == nil {
				want = f
				continue
			}
			if f.DefValue != want.DefValue {
				t.Errorf("--%s default: %s %q, another command %q", name, cmd, f.DefValue, want.DefValue)
			}
		}
	}
	for _, name := range []string{"cooldown"} {
		if a, b := coCmd.Flags().Lookup(name).DefValue, swCmd.Flags().Lookup(name).DefValue; a != b {
			t.Errorf("--%s default: coordinator %q, sweep %q", name, a, b)
		}
	}
	// Shared by the agent too, and the same flag in every detail: one
	// registration (flags.MetricsListen), one meaning.
	agCmd := quietCLI().agentCmd()
	for _, name := range []string{"metrics-listen"} {
		var want *pflag.Flag
		for _, cmd := range []struct {
			name string
			fs   *pflag.FlagSet
		}{{"run", runCmd.Flags()}, {"coordinator", coCmd.Flags()}, {"sweep", swCmd.Flags()}, {"agent", agCmd.Flags()}} {
			f := cmd.fs.Lookup(name)
			switch {
			case f == nil:
				t.Errorf("%s has no --%s", cmd.name, name)
			case want == nil:
				want = f
			case f.DefValue != want.DefValue || f.Usage != want.Usage || f.Value.Type() != want.Value.Type() || flags.GroupOf(f) != flags.GroupOf(want):
				t.Errorf("--%s in %s: default %q, %q, group %s; in run: default %q, %q, group %s", name, cmd.name,
					f.DefValue, f.Usage, flags.GroupOf(f), want.DefValue, want.Usage, flags.GroupOf(want))
			}
		}
	}
}

// TestExitCodes: usage mistakes exit 2 with one line and a pointer to -h
// in every command; help and version exit 0.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "a command is required"},
		{[]string{"nope"}, exitUsage, `unknown command "nope"`},
		{[]string{"--version"}, exitOK, ""},
		{[]string{"version"}, exitOK, ""},
		{[]string{"run", "-h"}, exitOK, ""},
		{[]string{"completion", "bash"}, exitOK, ""},
		{[]string{"run", "--no-such-flag"}, exitUsage, "unknown flag: --no-such-flag"},
		{[]string{"run", "--out", "o", "--concurrency", "x"}, exitUsage, "--concurrency"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--metadata", "completed=1"}, exitUsage, `metadata key "completed"`},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--result-filename", "a/b.json"}, exitUsage, "--result-filename"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--threshold", "latency<1s"}, exitUsage, "unknown metric"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--threshold", "goodput>1"}, exitUsage, "needs --goodput"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--goodput", "ttft:soon"}, exitUsage, "--goodput"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--worker-header", "bad header"}, exitUsage, "--worker-header"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--target", "notaurl"}, exitUsage, "must be http:// or https://"},
		{[]string{"coordinator", "--target", "http://x:1", "--model", "m", "--worker-header", "a b"}, exitUsage, "--worker-header"},
		{[]string{"sweep", "--levels", "0"}, exitUsage, "--levels"},
		{[]string{"coordinator"}, exitUsage, "--target is required"},
		{[]string{"coordinator", "--target", "http://t:1", "--model", "m", "--on-loss", "maybe"}, exitUsage, "maybe"},
		{[]string{"coordinator", "--target", "http://t:1", "--model", "m", "--threshold", "ttft<1s"}, exitUsage, "unknown metric"},
		{[]string{"agent"}, exitUsage, "--coordinator ADDR is required"},
		{[]string{"run", "--out", "o", "--concurrency", "4", "--metrics-listen", "9090"}, exitUsage, `--metrics-listen "9090": want host:port`},
		{[]string{"coordinator", "--target", "http://t:1", "--model", "m", "--metrics-listen", "localhost:http"}, exitUsage, "--metrics-listen"},
		{[]string{"sweep", "--levels", "4", "--modes", "a", "--switch", "none", "--out", "o", "--metrics-listen", ":99999"}, exitUsage, "not a number from 0 to 65535"},
		{[]string{"agent", "--coordinator", "c:7070", "--metrics-listen", "::1"}, exitUsage, "--metrics-listen"},
		{[]string{"agent", "--bogus"}, exitUsage, "unknown flag"},
		{[]string{"sim", "--router", "sideways"}, exitUsage, "sideways"},
		// The agents' Job flags fail before any probe: the targets
		// below are unreachable (port 1).
		{[]string{"coordinator", "--target", "http://127.0.0.1:1", "--model", "m", "--kube-agents", "--agent-memory", "garbage"}, exitUsage, `parse --agent-memory "garbage"`},
		{[]string{"coordinator", "--target", "http://127.0.0.1:1", "--model", "m", "--kube-agents", "--agent-metrics-port", "70000"}, exitUsage, "metrics port 70000"},
		{[]string{"sweep", "--target", "http://127.0.0.1:1", "--model", "m", "--levels", "4", "--modes", "a", "--switch", "none", "--out", "o", "--kube-agents", "--agent-cpu", "lots"}, exitUsage, `--agent-cpu "lots"`},
		{[]string{"sweep", "--target", "http://127.0.0.1:1", "--model", "m", "--levels", "4000", "--modes", "a", "--switch", "none", "--out", "o", "--kube-agents", "--agents", "1", "--agent-cpu", "1"}, exitUsage, "--agent-overcommit"},
		{[]string{"probe"}, exitUsage, "--target URL is required"},
		{[]string{"report"}, exitUsage, "at least one"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCommand(t.Context(), tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.want, stdout, stderr)
			}
			if code == exitUsage {
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				if n := len(lines); n > 3 || !strings.Contains(lines[n-1], "-h' for usage") {
					t.Errorf("usage error not one line plus the pointer to -h:\n%s", stderr)
				}
			}
		})
	}
}

// TestInterspersedFlags: flags may follow positional arguments, as the
// README's report example does.
func TestInterspersedFlags(t *testing.T) {
	cmd, _ := quietCLI().newRun()
	if err := cmd.ParseFlags([]string{"--out", "a", "--seed", "5", "--concurrency", "2"}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCommand(t.Context(), "report", filepath.Join(t.TempDir(), "missing"), "--out", t.TempDir())
	if strings.Contains(stderr, "stat --out") || code == exitUsage {
		t.Errorf("report took --out as a path: exit %d, %s", code, stderr)
	}
}

// TestDeprecatedAliases: the old names still work, say so in one line and
// set the new setting.
func TestDeprecatedAliases(t *testing.T) {
	swCmd, so := quietCLI().newSweep()
	var errb strings.Builder
	swCmd.SetErr(&errb)
	swCmd.Flags().SetOutput(&errb)
	out := filepath.Join(t.TempDir(), "o")
	if err := swCmd.ParseFlags([]string{"--levels", "5,10", "--measure", "90s", "--modes", "kv", "--switch", "none",
		"--target", "http://t:1", "--model", "m", "--out", out}); err != nil {
		t.Fatal(err)
	}
	s, err := so.spec(swCmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Levels, []int{5, 10}) || s.Measure.D().Seconds() != 90 {
		t.Errorf("levels %v measure %s", s.Levels, s.Measure)
	}
	for _, want := range []string{"--levels has been deprecated, use --concurrency", "--measure has been deprecated, use --duration"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("no notice %q in %q", want, errb.String())
		}
	}
	simCmd := quietCLI().simCmd()
	simCmd.Flags().SetOutput(&errb)
	if err := simCmd.ParseFlags([]string{"--sim-router", "round_robin"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := simCmd.Flags().GetString("router"); v != "round_robin" {
		t.Errorf("sim --sim-router set router %q", v)
	}
}

// TestJudgedExitCodes: a run whose thresholds fail exits 3, a run where
// every request failed exits 4; both save their result first.
func TestJudgedExitCodes(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "--log-level", "warn", "run", "--concurrency", "2", "--warmup", "0s",
		"--duration", "1s", "--sim-time-scale", "20", "--goodput", "ttft:1000", "--threshold", "error_rate<1%",
		"--threshold", "goodput>100000", "--out", dir)
	if code != exitThresholds || !strings.Contains(stderr, "1 threshold(s) failed: goodput>100000") ||
		!strings.Contains(stdout, "pass error_rate<1%") || !strings.Contains(stdout, "Request goodput (req/s):") {
		t.Errorf("thresholds: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil {
		t.Errorf("no result.json after failed thresholds: %v", err)
	}
	dir = t.TempDir()
	code, _, stderr = runCommand(t.Context(), "--log-level", "error", "run", "--target", "http://127.0.0.1:1", "--model", "m",
		"--concurrency", "2", "--warmup", "0s", "--duration", "1s", "--skip-preflight", "--out", dir)
	if code != exitAllFailed || !strings.Contains(stderr, "every request failed") || !strings.Contains(stderr, "connect") {
		t.Errorf("all failed: exit %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil {
		t.Errorf("no result.json after every request failed: %v", err)
	}
	code, _, stderr = runCommand(t.Context(), "run", "--target", "http://127.0.0.1:1", "--model", "m", "--concurrency", "2", "--out", t.TempDir())
	if code != exitError || !strings.Contains(stderr, "cannot reach http://127.0.0.1:1") {
		t.Errorf("preflight: exit %d, stderr %s", code, stderr)
	}
}

// TestSweepPreflightFirst: a sweep whose target cannot serve stops before
// it creates anything, with the reason in one line.
func TestSweepPreflightFirst(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runCommand(t.Context(), "sweep", "--target", "http://127.0.0.1:1", "--model", "m", "--concurrency", "2",
		"--modes", "kv", "--switch", "none", "--out", out)
	if code != exitError || !strings.Contains(stderr, "preflight: cannot reach http://127.0.0.1:1") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output directory exists after a failed preflight: %v", err)
	}
}

// TestFailFast: a run whose every request fails the same way stops after
// --fail-fast instead of burning its duration, and exits 4 naming the class.
func TestFailFast(t *testing.T) {
	start := time.Now()
	code, _, stderr := runCommand(t.Context(), "--log-level", "error", "run", "--target", "http://127.0.0.1:1", "--model", "m",
		"--concurrency", "2", "--warmup", "10s", "--duration", "1m", "--skip-preflight", "--fail-fast", "500ms", "--out", t.TempDir())
	if code != exitAllFailed || !strings.Contains(stderr, "all connect") || !strings.Contains(stderr, "stopped early") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s for a 500ms fail-fast", took)
	}
}

// TestFailFastWithAgents: with agents (and so a coordinator) the same
// fail-fast applies, from the agents' reports.
func TestFailFastWithAgents(t *testing.T) {
	start := time.Now()
	code, _, stderr := runCommand(t.Context(), "--log-level", "error", "run", "--target", "http://127.0.0.1:1", "--model", "m",
		"--concurrency", "2", "--agents", "2", "--warmup", "10s", "--duration", "1m", "--skip-preflight", "--fail-fast", "1s", "--out", t.TempDir())
	if code != exitAllFailed || !strings.Contains(stderr, "all connect") || !strings.Contains(stderr, "stopped early") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s for a 1s fail-fast", took)
	}
}

// TestAbortOnFail: with --abort-on-fail a threshold that fails while the
// level is measured stops it at once, one engine or a fleet: the result so
// far is saved marked interrupted, the threshold is printed as failed, and
// the command exits 3.
func TestAbortOnFail(t *testing.T) {
	for _, agents := range []string{"0", "2"} {
		t.Run("agents "+agents, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			code, stdout, stderr := runCommand(t.Context(), "--log-level", "error", "run", "--concurrency", "4", "--agents", agents,
				"--warmup", "500ms", "--duration", "2m", "--sim-time-scale", "20", "--max-tokens", "16",
				"--threshold", "ttft_p95<1us", "--threshold", "error_rate<1%", "--abort-on-fail", "--out", dir)
			if code != exitThresholds || !strings.Contains(stdout, "FAIL ttft_p95<1us") || !strings.Contains(stdout, "pass error_rate<1%") ||
				!strings.Contains(stdout, "Stopped early (--abort-on-fail)") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if took := time.Since(start); took > time.Minute {
				t.Errorf("took %s: the run was not stopped early", took)
			}
			res := readResult(t, dir)
			if res["interrupted"] != true {
				t.Errorf("result.json interrupted = %v", res["interrupted"])
			}
			if s, _ := res["stopped"].(string); !strings.Contains(s, "--abort-on-fail") {
				t.Errorf("result.json stopped = %q, want the failed threshold named", s)
			}
		})
	}
}

// TestReportComparesRuns: two `run` output directories (kv and
// round_robin, set apart by --label) compare in one report, from the runs'
// own histograms.
func TestReportComparesRuns(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []string{"kv", "round_robin"} {
		code, stdout, stderr := runCommand(t.Context(), "--log-level", "warn", "run", "--concurrency", "4", "--warmup", "1s",
			"--duration", "2s", "--sim-time-scale", "20", "--sim-router", mode, "--label", mode, "--out", filepath.Join(dir, mode))
		if code != exitOK {
			t.Fatalf("run %s: exit %d\n%s\n%s", mode, code, stdout, stderr)
		}
	}
	out := filepath.Join(dir, "report")
	code, stdout, stderr := runCommand(t.Context(), "report", filepath.Join(dir, "kv"), filepath.Join(dir, "round_robin"), "--out", out)
	if code != exitOK || !strings.Contains(stdout, "kv against round_robin") {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- Modes: kv (candidate), round_robin (baseline)", "- Runs: 1", "- Concurrency levels: 4"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// A directory that is neither a sweep's nor a run's says what it lacks.
	code, _, stderr = runCommand(t.Context(), "report", t.TempDir())
	if code != exitError || !strings.Contains(stderr, "no benchmark-sweep-*.tsv (a sweep's output) and no point.json (a run's)") {
		t.Errorf("empty directory: exit %d, %s", code, stderr)
	}
}

// TestTopErrorsTravelFromAgents: the server's own message of a failure
// reaches result.json and the block through agents and the coordinator
// (real loopback gRPC), counted once per request.
func TestTopErrorsTravelFromAgents(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"object":"error","message":"This model's maximum context length is 1024 tokens. However, you requested %d tokens.","type":"BadRequestError","code":400}`, 3000+i)
	}))
	defer srv.Close()
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "--log-level", "error", "run", "--target", srv.URL, "--model", "m",
		"--concurrency", "4", "--agents", "2", "--warmup", "0s", "--duration", "2s", "--skip-preflight", "--out", dir)
	if code != exitAllFailed || !strings.Contains(stdout, "Error 1 (bad_request,") || !strings.Contains(stdout, "maximum context length is 1024 tokens") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResult(t, dir)
	top, _ := res["top_errors"].([]any)
	if len(top) != 1 {
		t.Fatalf("top_errors %v, want one error", res["top_errors"])
	}
	e := top[0].(map[string]any)
	if e["class"] != "bad_request" || e["count"].(float64) != res["failed"].(float64) ||
		e["message"] != "This model's maximum context length is N tokens. However, you requested N tokens." {
		t.Errorf("top error %v, failed %v", e, res["failed"])
	}
	// report.md lists them too, from the run's saved window.
	out := filepath.Join(t.TempDir(), "report")
	if code, stdout, stderr := runCommand(t.Context(), "report", dir, "--out", out); code != exitOK {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Errors") || !strings.Contains(string(md), "| bad_request |") ||
		!strings.Contains(string(md), "maximum context length is 1024 tokens") {
		t.Errorf("report.md lacks the errors:\n%s", md)
	}
}
