package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

// freeAddr is testserve.FreeAddr.
func freeAddr(t *testing.T) string { return testserve.FreeAddr(t) }

// TestCoordinatorAndAgentsCommands runs `fleetbench coordinator` and two
// `fleetbench agent`s in one process against an OpenAI-style server: the
// coordinator prints the vLLM block per stage and writes each stage's
// result.json and every window file.
func TestCoordinatorAndAgentsCommands(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	t.Setenv(tokenEnv, "cmd-test-token")
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	out := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	agentCodes := make([]int, 2)
	agentErrs := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			agentCodes[i], _, agentErrs[i] = runCommand(ctx, "--log-level", "error", "agent", "--coordinator", addr,
				"--id", fmt.Sprintf("cmd-agent-%d", i), "--index", fmt.Sprint(i), "--api-key-env", "FLEETBENCH_TEST_KEY")
		})
	}
	code, stdout, stderr := runCommand(ctx, "--log-level", "error", "coordinator", "--listen", addr, "--agents", "2",
		"--target", srv.URL, "--model", "m", "--concurrency", "2,4", "--warmup", "300ms", "--duration", "1s",
		"--window", "500ms", "--max-tokens", "16", "--heartbeat", "100ms", "--heartbeat-timeout", "2s",
		"--join-timeout", "30s", "--turns", "2-3", "--prompt-tokens", "800", "--cooldown", "200ms", "--out", out,
		"--api-key-env", "FLEETBENCH_TEST_KEY", "--threshold", "error_rate<50%")
	wg.Wait()
	if code != exitOK {
		t.Fatalf("coordinator exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for i, c := range agentCodes {
		if c != exitOK {
			t.Errorf("agent %d exit %d: %s", i, c, agentErrs[i])
		}
	}
	if n := strings.Count(stdout, "Serving Benchmark Result"); n != 2 {
		t.Errorf("stdout has %d vLLM blocks, want one per stage:\n%s", n, stdout)
	}
	// Each stage is judged: one pass line per stage.
	if n := strings.Count(stdout, "pass error_rate<50%"); n != 2 {
		t.Errorf("stdout has %d threshold lines, want one per stage:\n%s", n, stdout)
	}
	for _, want := range []string{"Stage 0 (level 2)", "Stage 1 (level 4)", "Successful requests:", "P99 TTFT (ms):"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	var total float64
	for i, level := range []float64{2, 4} {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("stage-%d", i), "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("stage %d result.json: %v", i, err)
		}
		completed, _ := res["completed"].(float64)
		if completed < 5 || res["max_concurrency"] != level || res["failed"] != 0.0 {
			t.Errorf("stage %d: completed %v, max_concurrency %v, failed %v", i, completed, res["max_concurrency"], res["failed"])
		}
		if d, _ := res["duration"].(float64); d < 0.9 || d > 1.2 {
			t.Errorf("stage %d: duration %v, want about 1s", i, d)
		}
		total += completed
	}
	if int64(total) >= requests.Load() {
		t.Errorf("results count %v requests of %d served: warm-ups must be left out", total, requests.Load())
	}
	// Two stages of a warm-up and two measured windows each.
	if names, _ := filepath.Glob(filepath.Join(out, "window-*.json")); len(names) < 6 {
		t.Errorf("%d window files, want at least 6", len(names))
	}
	if strings.Contains(stdout+stderr, testAPIKey) || strings.Contains(stdout+stderr, "cmd-test-token") {
		t.Error("a secret was printed")
	}
}
