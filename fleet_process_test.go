//go:build integration

package main

// Multi-process tests: real `fleetbench coordinator` and `fleetbench agent`
// processes on loopback. The test binary stands in for the fleetbench
// binary (TestMain runs main when FLEETBENCH_TEST_AS_MAIN is set), so each
// process is the command exactly as users run it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

// keyedServer is an OpenAI-style server that refuses every request
// without its key, /v1/models included (so the coordinator's preflight
// finds the key required); chat completions stream three tokens.
func keyedServer(t *testing.T, requests *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testserve.APIKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/v1/chat/completions":
			requests.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := range 3 {
				time.Sleep(5 * time.Millisecond)
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},\"finish_reason\":null}]}\n\n", i)
				_ = rc.Flush()
			}
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":3,\"total_tokens\":53}}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// coordinatorArgs are a short coordinator run for n agents on addr.
func coordinatorArgs(addr string, n int, target string, extra ...string) []string {
	return append([]string{"--log-level", "warn", "coordinator", "--listen", addr, "--agents", fmt.Sprint(n),
		"--target", target, "--concurrency", "3", "--warmup", "300ms", "--duration", "1500ms", "--cooldown", "0s",
		"--max-tokens", "8", "--turns", "2", "--prompt-tokens", "300", "--heartbeat", "200ms", "--join-timeout", "60s"}, extra...)
}

func agentArgs(addr string, i int) []string {
	return []string{"--log-level", "warn", "agent", "--coordinator", addr, "--id", fmt.Sprintf("proc-agent-%d", i), "--index", fmt.Sprint(i)}
}

// TestProcessesAgentsWithoutTheKey: the target needs a key the
// coordinator has and its agents lack. Each agent says so as it joins; the
// coordinator exits non-zero within seconds, printing their message, and
// so do the agents; no request is sent but the coordinator's preflight.
func TestProcessesAgentsWithoutTheKey(t *testing.T) {
	var requests atomic.Int64
	srv := keyedServer(t, &requests)
	addr := freeAddr(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	keyVar := "FLEETBENCH_PROC_KEY"
	co := startProc(t, ctx, "coordinator", "", nil, map[string]string{keyVar: testserve.APIKey, tokenEnv: "proc-token"},
		coordinatorArgs(addr, 2, srv.URL, "--model", "m", "--api-key-env", keyVar, "--out", out)...)
	// Agent 0 has a termination log, as a Kubernetes container has.
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var agents []*proc
	for i := range 2 {
		args := agentArgs(addr, i)
		if i == 0 {
			args = append(args, "--termination-log", termLog)
		}
		agents = append(agents, startProc(t, ctx, fmt.Sprintf("agent %d", i), "", []string{keyVar}, map[string]string{tokenEnv: "proc-token"}, args...))
	}
	code := co.wait(t, time.Minute)
	if code == exitOK || !strings.Contains(co.errb.String(), "no agent can run") ||
		!strings.Contains(co.errb.String(), "environment variable "+keyVar+" is not set on this agent, and the target requires an API key") {
		t.Fatalf("%s", co)
	}
	if co.finishedIn > 20*time.Second {
		t.Errorf("the coordinator took %v to give up", co.finishedIn)
	}
	for _, a := range agents {
		if c := a.wait(t, 30*time.Second); c == exitOK || !strings.Contains(a.errb.String(), "agent cannot run: credential") {
			t.Errorf("%s", a)
		}
	}
	if b, err := os.ReadFile(termLog); err != nil || !strings.HasPrefix(string(b), "agent cannot run: credential: environment variable "+keyVar) {
		t.Errorf("termination log %q (%v)", b, err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d chat requests were sent, want only the coordinator's preflight", n)
	}
	if strings.Contains(co.out.String()+co.errb.String(), testserve.APIKey) {
		t.Error("the key was printed")
	}
}

// TestProcessesOneAgentLacksTheDataset: three agents, one of which has no
// dataset at the (relative) path the spec names. Under --on-loss continue
// the stage runs on the other two, is marked degraded, and the outputs name
// the agent and its reason; under --on-loss fail the coordinator exits
// non-zero with it.
func TestProcessesOneAgentLacksTheDataset(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("pkg", "workload", "testdata", "sharegpt_sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	srv := keyedServer(t, &requests)
	for _, policy := range []string{"continue", "fail"} {
		t.Run(policy, func(t *testing.T) {
			addr := freeAddr(t)
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			env := map[string]string{"OPENAI_API_KEY": testserve.APIKey, tokenEnv: "proc-token"}
			co := startProc(t, ctx, "coordinator", "", nil, env,
				coordinatorArgs(addr, 3, srv.URL, "--model", "m", "--workload", "sharegpt", "--dataset", "data/sharegpt.json",
					"--on-loss", policy, "--out", out)...)
			var agents []*proc
			for i := range 3 {
				dir := t.TempDir()
				if i != 2 {
					if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, "data", "sharegpt.json"), sample, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				agents = append(agents, startProc(t, ctx, fmt.Sprintf("agent %d", i), dir, nil, env, agentArgs(addr, i)...))
			}
			code := co.wait(t, time.Minute)
			why := "proc-agent-2 failed at join (dataset): sharegpt dataset: stat data/sharegpt.json: no such file or directory"
			if policy == "fail" {
				if code == exitOK || !strings.Contains(co.errb.String(), `agent "proc-agent-2" (dataset)`) {
					t.Fatalf("%s", co)
				}
				// An agent that had not joined yet keeps trying to reach
				// the coordinator, as agents started before it do.
				for _, a := range agents[:2] {
					_ = a.cmd.Process.Kill()
				}
				if c := agents[2].wait(t, 30*time.Second); c == exitOK {
					t.Errorf("%s", agents[2])
				}
				return
			}
			for _, a := range agents {
				a.wait(t, 30*time.Second)
			}
			if code != exitOK {
				t.Fatalf("%s", co)
			}
			stdout := co.out.String()
			if !strings.Contains(stdout, "degraded: an agent was lost or failed") || !strings.Contains(stdout, why) {
				t.Errorf("the coordinator's output lacks the degraded stage or the agent's reason:\n%s", stdout)
			}
			b, err := os.ReadFile(filepath.Join(out, "stage-0", "result.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res map[string]any
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			notes, _ := res["agent_notes"].([]any)
			if len(notes) != 1 || notes[0] != why {
				t.Errorf("agent_notes %v, want [%q]", res["agent_notes"], why)
			}
			if c, _ := res["completed"].(float64); c == 0 {
				t.Error("the two healthy agents measured nothing")
			}
			if c := agents[2].code; c == exitOK || !strings.Contains(agents[2].errb.String(), "agent cannot run: dataset") {
				t.Errorf("%s", agents[2])
			}
		})
	}
}

// TestProcessesCoordinatorWithoutModel: refused at once, before any agent
// could join.
func TestProcessesCoordinatorWithoutModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	co := startProc(t, ctx, "coordinator", "", nil, nil, coordinatorArgs(freeAddr(t), 2, "http://127.0.0.1:9")...)
	if code := co.wait(t, 30*time.Second); code != exitUsage || !strings.Contains(co.errb.String(), "--model is required") {
		t.Fatalf("%s", co)
	}
}

// TestProcessesNoKeyNeeded: the simulator needs no key and no process has
// the default key variable set: the run measures, and the agents' status
// carries the warning.
func TestProcessesNoKeyNeeded(t *testing.T) {
	s := startSim(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	noKey := []string{"OPENAI_API_KEY"}
	env := map[string]string{tokenEnv: "proc-token"}
	co := startProc(t, ctx, "coordinator", "", noKey, env, coordinatorArgs(addr, 2, s.URL(), "--model", "sim-model", "--out", t.TempDir())...)
	var agents []*proc
	for i := range 2 {
		agents = append(agents, startProc(t, ctx, fmt.Sprintf("agent %d", i), "", noKey, env, agentArgs(addr, i)...))
	}
	if code := co.wait(t, time.Minute); code != exitOK {
		t.Fatalf("%s", co)
	}
	for _, a := range agents {
		if c := a.wait(t, 30*time.Second); c != exitOK {
			t.Errorf("%s", a)
		}
	}
	stdout := co.out.String()
	if !strings.Contains(stdout, "Successful requests:") || !strings.Contains(stdout, "proc-agent-0 ready; warnings: credential: environment variable OPENAI_API_KEY is not set on this agent") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// TestProcessesAgentFileLimit: an agent whose hard open-file limit is
// below its share of sessions (a container runtime's low LimitNOFILE)
// says so, with both figures and what to raise, and the coordinator prints
// it among the agents' warnings.
func TestProcessesAgentFileLimit(t *testing.T) {
	s := startSim(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env := map[string]string{tokenEnv: "proc-token"}
	co := startProc(t, ctx, "coordinator", "", nil, env, coordinatorArgs(addr, 1, s.URL(), "--model", "sim-model",
		"--api-key-env", "", "--concurrency", "200", "--out", t.TempDir())...)
	ag := startProc(t, ctx, "agent", "", nil, map[string]string{tokenEnv: "proc-token", noFileEnv: "128"}, agentArgs(addr, 0)...)
	co.wait(t, time.Minute)
	ag.wait(t, 30*time.Second)
	for _, p := range []*proc{co, ag} {
		out := p.out.String() + p.errb.String()
		if !strings.Contains(out, "open-file limit (soft 128, hard 128) is below the 264 descriptors 200 sessions need") {
			t.Errorf("%s does not report the open-file limit:\n%s", p.name, p)
		}
	}
}

// TestNoZeroRequestStageExitsZero: against a server slower than the
// measured time, the one session's turn starts in the warm-up and is still
// running when the measurement ends, so the measurement has no request.
// Every command says so and exits non-zero: run, run with agents, the
// coordinator with an agent, and a sweep.
func TestNoZeroRequestStageExitsZero(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(4 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	common := []string{"--target", srv.URL, "--model", "m", "--skip-preflight", "--concurrency", "1", "--warmup", "500ms",
		"--duration", "1s", "--max-tokens", "4", "--turns", "1", "--prompt-tokens", "300", "--api-key-env", ""}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	check := func(name string, code int, stdout, stderr string) {
		t.Helper()
		if code == exitOK || !strings.Contains(stderr, "measured no requests") {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
		}
	}
	code, stdout, stderr := runCommand(ctx, append([]string{"--log-level", "error", "run", "--out", t.TempDir(), "--drain-timeout", "100ms"}, common...)...)
	check("run", code, stdout, stderr)
	code, stdout, stderr = runCommand(ctx, append([]string{"--log-level", "error", "run", "--agents", "2", "--out", t.TempDir(), "--drain-timeout", "100ms"}, common...)...)
	check("run --agents 2", code, stdout, stderr)

	addr := freeAddr(t)
	t.Setenv(tokenEnv, "zero-token")
	agentDone := make(chan int, 1)
	go func() {
		c, _, _ := runCommand(ctx, "--log-level", "error", "agent", "--coordinator", addr, "--id", "zero-agent")
		agentDone <- c
	}()
	code, stdout, stderr = runCommand(ctx, append([]string{"--log-level", "error", "coordinator", "--listen", addr, "--agents", "1",
		"--grace", "1s", "--cooldown", "0s", "--out", t.TempDir()}, common...)...)
	check("coordinator", code, stdout, stderr)
	<-agentDone

	code, stdout, stderr = runCommand(ctx, append([]string{"--log-level", "error", "sweep", "--modes", "a", "--switch", "none",
		"--ready-skip", "--snapshots", "1", "--cooldown", "0s", "--out", t.TempDir()}, common...)...)
	check("sweep", code, stdout, stderr)
}
