package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

const testAPIKey = testserve.APIKey

// sseServer is testserve.SSE.
func sseServer(t *testing.T, requests *atomic.Int64) *httptest.Server {
	return testserve.SSE(t, requests)
}

func runCommand(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runMain(ctx, func() {}, args, &out, &errb)
	return code, out.String(), errb.String()
}

func readResult(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatalf("read result.json: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("parse result.json: %v\n%s", err, b)
	}
	return m
}

func TestRunAgainstServer(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "run", "--target", srv.URL, "--model", "m",
		"--concurrency", "4", "--warmup", "300ms", "--duration", "1s", "--turns", "2-3",
		"--prompt-tokens", "300", "--documents", "2", "--max-tokens", "16", "--api-key-env", "FLEETBENCH_TEST_KEY",
		"--session-header", "X-Session-ID", "--percentiles", "50,90,99", "--out", dir, "--save-requests")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Serving Benchmark Result", "Successful requests:", "Failed requests:", "P90 TTFT (ms):", "Maximum request concurrency:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, testAPIKey) {
		t.Error("the API key was printed")
	}
	res := readResult(t, dir)
	completed, _ := res["completed"].(float64)
	// 4 sessions, ~60 ms turns, 1 s: roughly 60 turns.
	if completed < 20 || int64(completed) >= requests.Load() {
		t.Errorf("completed %v of %d requests served: want the measurement window only", completed, requests.Load())
	}
	if res["failed"].(float64) != 0 || res["max_concurrency"].(float64) != 4 {
		t.Errorf("failed %v max_concurrency %v", res["failed"], res["max_concurrency"])
	}
	if _, ok := res["interrupted"]; ok {
		t.Error("a full run is marked interrupted")
	}
	if d := res["duration"].(float64); d < 0.99 || d > 1.01 {
		t.Errorf("duration %v, want 1", d)
	}
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), testAPIKey) {
		t.Error("result.json holds the API key")
	}

	// requests.jsonl has every turn, warm-up (window 0) included.
	f, err := os.Open(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	windows := map[float64]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("requests.jsonl: %v", err)
		}
		windows[line["window"].(float64)]++
	}
	// The server saw every request of both windows, and one more: the
	// preflight's test completion, sent before the load.
	if windows[0] == 0 || float64(windows[1]) != completed || int64(windows[0]+windows[1])+1 != requests.Load() {
		t.Errorf("requests.jsonl windows %v, completed %v, served %d (want windows + 1 preflight)", windows, completed, requests.Load())
	}
}

func TestRunInterruptedWritesPartialResult(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	dir := t.TempDir()
	// A signal cancels the context (signal.NotifyContext).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(1200*time.Millisecond, cancel)
	code, stdout, stderr := runCommand(ctx, "run", "--target", srv.URL, "--model", "m",
		"--concurrency", "3", "--warmup", "200ms", "--duration", "1m", "--api-key-env", "FLEETBENCH_TEST_KEY",
		"--prompt-tokens", "300", "--out", dir)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, stdout, stderr)
	}
	if !strings.Contains(stdout, "Serving Benchmark Result") || !strings.Contains(stdout, "Interrupted") {
		t.Errorf("stdout:\n%s", stdout)
	}
	res := readResult(t, dir)
	if res["interrupted"] != true {
		t.Errorf("interrupted = %v, want true", res["interrupted"])
	}
	if s, _ := res["stopped"].(string); !strings.Contains(s, "interrupted") {
		t.Errorf("stopped = %q, want the interrupt named", s)
	}
	if d := res["duration"].(float64); d < 0.5 || d > 1+fleet.InterruptDrain.Seconds() {
		t.Errorf("duration %v, want about 1 s (the part measured)", d)
	}
	if res["completed"].(float64) == 0 {
		t.Error("nothing completed")
	}
}

// TestRunInterruptedInWarmupKeepsResult: a signal in the warm-up, before
// the measurement window saw a turn, still leaves result.json, marked
// interrupted and stopped, with the warm-up's turns; on one engine and on
// agents alike. The exit stays the interrupt's.
func TestRunInterruptedInWarmupKeepsResult(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"engine", nil},
		{"agents", []string{"--agents", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
			var requests atomic.Int64
			srv := sseServer(t, &requests)
			defer srv.Close()
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			time.AfterFunc(1500*time.Millisecond, cancel)
			args := append([]string{"run", "--target", srv.URL, "--model", "m",
				"--concurrency", "3", "--warmup", "1m", "--duration", "1m", "--api-key-env", "FLEETBENCH_TEST_KEY",
				"--prompt-tokens", "300", "--out", dir}, tc.extra...)
			code, stdout, stderr := runCommand(ctx, args...)
			if code != exitInterrupted {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, stdout, stderr)
			}
			res := readResult(t, dir)
			if res["interrupted"] != true {
				t.Errorf("interrupted = %v, want true", res["interrupted"])
			}
			if s, _ := res["stopped"].(string); !strings.Contains(s, "warm-up") {
				t.Errorf("stopped = %q, want the warm-up named", s)
			}
			if res["completed"].(float64) == 0 {
				t.Errorf("no warm-up turn kept\nstdout:\n%s", stdout)
			}
		})
	}
}

func TestRunAgainstBuiltInSimulator(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "run", "--concurrency", "8", "--warmup", "500ms",
		"--duration", "2s", "--sim-time-scale", "20", "--sim-replicas", "2", "--max-tokens", "64",
		"--prompt-tokens", "500", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResult(t, dir)
	if res["completed"].(float64) == 0 || res["failed"].(float64) != 0 {
		t.Errorf("completed %v failed %v\nstderr:\n%s", res["completed"], res["failed"], stderr)
	}
	if !strings.Contains(stdout, "Serving Benchmark Result") {
		t.Errorf("stdout:\n%s", stdout)
	}
	// A closed loop with no think time: the peak in flight is the
	// concurrency, exactly.
	if res["late_sends"].(float64) == 0 && res["max_concurrent_requests"].(float64) != 8 {
		t.Errorf("max_concurrent_requests %v, want 8", res["max_concurrent_requests"])
	}
}

// TestRunBlockingReads runs a level both ways against a real server: with
// --blocking-reads the client reads every stream on its request's
// goroutine, without it (on Linux) in the event loops, and both measure
// the same requests.
func TestRunBlockingReads(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	for _, blocking := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"run", "--log-level", "debug", "--target", srv.URL, "--model", "m", "--concurrency", "2",
			"--warmup", "200ms", "--duration", "600ms", "--max-tokens", "8", "--api-key-env", "FLEETBENCH_TEST_KEY", "--out", dir}
		if blocking {
			args = append(args, "--blocking-reads")
		}
		code, stdout, stderr := runCommand(t.Context(), args...)
		if code != exitOK {
			t.Fatalf("blocking %v: exit %d\nstdout:\n%s\nstderr:\n%s", blocking, code, stdout, stderr)
		}
		loops := !blocking && runtime.GOOS == "linux"
		if want := fmt.Sprintf("event_loops=%t", loops); !strings.Contains(stderr, want) {
			t.Errorf("blocking %v: the log lacks %q:\n%s", blocking, want, stderr)
		}
		res := readResult(t, dir)
		if completed, _ := res["completed"].(float64); completed < 2 || res["failed"].(float64) != 0 {
			t.Errorf("blocking %v: completed %v failed %v", blocking, res["completed"], res["failed"])
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no out", []string{"--concurrency", "2"}},
		{"no load", []string{"--out", "x"}},
		{"concurrency with rate", []string{"--out", "x", "--concurrency", "2", "--request-rate", "3"}},
		{"burstiness in closed loop", []string{"--out", "x", "--concurrency", "2", "--burstiness", "0.5"}},
		{"bad turns", []string{"--out", "x", "--concurrency", "2", "--turns", "5-3"}},
		{"target without model", []string{"--out", "x", "--concurrency", "2", "--target", "http://h"}},
		{"bad percentiles", []string{"--out", "x", "--concurrency", "2", "--percentiles", "0,101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCommand(t.Context(), append([]string{"run"}, tt.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
		})
	}
}

func TestRunOpenLoopBudget(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "run", "--target", srv.URL, "--model", "m",
		"--request-rate", "40", "--arrival", "gamma", "--burstiness", "0.5", "--max-concurrency", "4",
		"--num-prompts", "15", "--single-turn", "--api-key-env", "FLEETBENCH_TEST_KEY", "--prompt-tokens", "300", "--out", dir,
		"--skip-preflight") // only the budget's requests reach the server
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResult(t, dir)
	if res["completed"].(float64) != 15 || requests.Load() != 15 {
		t.Errorf("completed %v, served %d; want the budget of 15", res["completed"], requests.Load())
	}
	if res["request_rate"].(float64) != 40 || res["burstiness"].(float64) != 0.5 || res["max_concurrency"].(float64) != 4 {
		t.Errorf("request_rate %v burstiness %v max_concurrency %v", res["request_rate"], res["burstiness"], res["max_concurrency"])
	}
	if !strings.Contains(stdout, "Request rate configured (RPS):") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

func TestRunWithAgentsUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"budget", []string{"--concurrency", "2", "--num-prompts", "10"}},
		{"open-loop cap", []string{"--request-rate", "3", "--max-concurrency", "2"}},
		{"negative", []string{"--concurrency", "2", "--agents", "-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--out", t.TempDir(), "--agents", "2"}, tt.args...)
			code, _, stderr := runCommand(t.Context(), args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
		})
	}
}

// TestNaturalStopReachesTheSimulator: `run` with the in-process simulator
// ends docchat answers by length by default (each turn asks for a length
// of the published distribution and the simulator generates to it) and by
// the model's own stop with --natural-stop (only the cap is sent and the
// simulator uses its natural-stop model). The cap of 4,000 is far above
// the ~880-token natural answers, so a length finish would mean the
// simulator still generated to max_tokens.
func TestNaturalStopReachesTheSimulator(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		finish string
	}{
		{"published lengths", nil, "length"},
		{"natural stop", []string{"--natural-stop"}, "stop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--log-level", "error", "run", "--concurrency", "4", "--warmup", "0s", "--duration", "1s",
				"--sim-time-scale", "50", "--max-tokens", "4000", "--save-requests", "--out", dir}, tt.args...)
			if code, _, stderr := runCommand(t.Context(), args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			f, err := os.Open(filepath.Join(dir, "requests.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			finishes := map[string]int{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r struct {
					FinishReason string `json:"finish_reason"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				finishes[r.FinishReason]++
			}
			t.Logf("finish reasons %v", finishes)
			if finishes[tt.finish] == 0 || len(finishes) != 1 {
				t.Errorf("finish reasons %v, want only %q", finishes, tt.finish)
			}
		})
	}
}

// TestSimNaturalStop: the standalone simulator generates to max_tokens
// (as a model does with ignore_eos) unless it is started with
// --natural-stop. The client sends only the cap of 4,000 (--natural-stop
// on run), far above the ~880-token natural answers.
func TestSimNaturalStop(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		finish string
	}{
		{"to max_tokens", nil, "length"},
		{"natural stop", []string{"--natural-stop"}, "stop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := freeAddr(t)
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan int, 1)
			go func() {
				code, _, _ := runCommand(ctx, append([]string{"--log-level", "error", "sim", "--listen", addr, "--time-scale", "200"}, tt.args...)...)
				done <- code
			}()
			t.Cleanup(func() { stop(); <-done })
			c, err := client.New(client.Config{BaseURL: "http://" + addr, Model: sim.DefaultModel, MaxTokens: 4000}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var res *client.Result
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				res = c.Stream(t.Context(), &client.Request{Messages: []openai.Message{{Role: openai.RoleUser, Content: "summarize the document"}}})
				if res.Class != client.ClassConnect || time.Now().After(deadline) {
					break
				}
			}
			if !res.OK() || res.FinishReason != tt.finish {
				t.Fatalf("class %q err %v finish %q after %d tokens; want finish %q", res.Class, res.Err, res.FinishReason, res.OutputTokens, tt.finish)
			}
			if tt.finish == "stop" && res.OutputTokens >= 4000 || tt.finish == "length" && res.OutputTokens != 4000 {
				t.Errorf("%d output tokens with finish %q", res.OutputTokens, res.FinishReason)
			}
			t.Logf("finish %q after %d tokens", res.FinishReason, res.OutputTokens)
		})
	}
}

// contextLengthMessage is the reason vLLM gives, inside a 200 stream, for
// a prompt longer than the model's context.
const contextLengthMessage = "This model's maximum context length is 1024 tokens. However, you requested 3017 tokens (2993 in the messages, 24 in the completion). Please reduce the length of the messages or completion."

// TestRunFailFastKeepsResult: a run that fail-fast stops, against a server
// whose every stream carries a coded error object, classes the failures by
// the code (400: bad_request), prints the server's whole message in its one
// reason line, and leaves result.json marked stopped with that message in
// its top errors: on one engine and on agents.
func TestRunFailFastKeepsResult(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"error\": {\"message\": %q, \"type\": \"BadRequestError\", \"code\": 400}}\n\n", contextLengthMessage)
	}))
	defer srv.Close()
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{name: "engine"},
		{name: "agents", extra: []string{"--agents", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--log-level", "error", "run", "--target", srv.URL, "--model", "m",
				"--concurrency", "2", "--warmup", "10s", "--duration", "1m", "--skip-preflight", "--fail-fast", "500ms", "--out", dir}, tt.extra...)
			code, stdout, stderr := runCommand(t.Context(), args...)
			if code != exitAllFailed {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitAllFailed, stdout, stderr)
			}
			if !strings.Contains(stderr, "all bad_request") || !strings.Contains(stderr, contextLengthMessage) {
				t.Errorf("stderr lacks the class or the whole message:\n%s", stderr)
			}
			res := readResult(t, dir)
			stopped, _ := res["stopped"].(string)
			if res["interrupted"] != true || !strings.Contains(stopped, contextLengthMessage) {
				t.Errorf("result.json interrupted %v, stopped %q: want true and the whole message", res["interrupted"], stopped)
			}
			if res["failed"].(float64) == 0 || res["completed"].(float64) != 0 {
				t.Errorf("failed %v completed %v, want failures only", res["failed"], res["completed"])
			}
			top, _ := res["top_errors"].([]any)
			if len(top) == 0 {
				t.Fatalf("result.json has no top errors: %v", res)
			}
			first, _ := top[0].(map[string]any)
			if first["class"] != "bad_request" || first["example"] != contextLengthMessage {
				t.Errorf("top error %v, want class bad_request with the whole message", first)
			}
		})
	}
}
