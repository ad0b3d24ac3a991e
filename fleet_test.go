package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestRunWithAgents(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "run", "--target", srv.URL, "--model", "m", "--agents", "3",
		"--concurrency", "6", "--warmup", "300ms", "--duration", "1500ms", "--turns", "2-3",
		"--prompt-tokens", "300", "--documents", "2", "--max-tokens", "16", "--api-key-env", "FLEETBENCH_TEST_KEY",
		"--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Serving Benchmark Result", "Successful requests:", "Maximum request concurrency:", "Agents: 3,"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, testAPIKey) {
		t.Error("the API key was printed")
	}
	res := readResult(t, dir)
	completed, failed := int64(res["completed"].(float64)), int64(res["failed"].(float64))
	if completed < 20 || failed != 0 {
		t.Errorf("completed %d failed %d", completed, failed)
	}
	// The measurement is the sum of the agents' parts: each agent's
	// requests, as the coordinator counted them, add up to the result's.
	m := regexp.MustCompile(`local-(\d+)=(\d+)`).FindAllStringSubmatch(stdout, -1)
	if len(m) != 3 {
		t.Fatalf("per-agent counts %v in:\n%s", m, stdout)
	}
	var sum int64
	for _, g := range m {
		n, _ := strconv.ParseInt(g[2], 10, 64)
		if n == 0 {
			t.Errorf("agent %s sent nothing", g[1])
		}
		sum += n
	}
	if sum != completed+failed {
		t.Errorf("agents' requests sum to %d, result has %d completed + %d failed", sum, completed, failed)
	}
	// The warm-up's turns are not in the result.
	if completed >= requests.Load() {
		t.Errorf("completed %d of %d requests served: want the measurement window only", completed, requests.Load())
	}
	if res["max_concurrency"].(float64) != 6 {
		t.Errorf("max_concurrency %v", res["max_concurrency"])
	}
	if d := res["duration"].(float64); d < 1.49 || d > 1.51 {
		t.Errorf("duration %v, want 1.5", d)
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
