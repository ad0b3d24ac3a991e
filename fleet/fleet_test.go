package fleet

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// agentsLevel is a level with agents against target, as `fleetbench run
// --agents 3 --concurrency 6` asks for it.
func agentsLevel(target, out string) RunConfig {
	return RunConfig{
		Client: client.Config{BaseURL: target, Model: "m", APIKeyEnv: "FLEETBENCH_TEST_KEY"},
		Workload: workload.Config{Kind: workload.KindDocChat, MaxTokens: 16, Documents: 2, PromptTokens: 300,
			Turns: workload.Turns{Min: 2, Max: 3}},
		Load:   load.Config{Concurrency: 6},
		Agents: 3, Warmup: 300 * time.Millisecond, Duration: 1500 * time.Millisecond, Drain: load.DefaultDrainTimeout,
		OutDir: out, Percentiles: []float64{99}, Version: "test",
	}
}

func TestRunWithAgents(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &errb})
	sum, err := agentsLevel(srv.URL, dir).Run(t.Context(), logger, &out, &errb)
	stdout, stderr := out.String(), errb.String()
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
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
	if sum == nil || sum.Completed != completed {
		t.Errorf("summary %+v, want the result.json's %d completed", sum, completed)
	}
	// The measurement is the sum of the agents' parts: each agent's
	// requests, as the coordinator counted them, add up to the result's.
	m := regexp.MustCompile(`local-(\d+)=(\d+)`).FindAllStringSubmatch(stdout, -1)
	if len(m) != 3 {
		t.Fatalf("per-agent counts %v in:\n%s", m, stdout)
	}
	var sum2 int64
	for _, g := range m {
		n, _ := strconv.ParseInt(g[2], 10, 64)
		if n == 0 {
			t.Errorf("agent %s sent nothing", g[1])
		}
		sum2 += n
	}
	if sum2 != completed+failed {
		t.Errorf("agents' requests sum to %d, result has %d completed + %d failed", sum2, completed, failed)
	}
	// The warm-up's turns are not in the result.
	if completed >= requests.Load() {
		t.Errorf("completed %d of %d requests served: want the measurement window only", completed, requests.Load())
	}
	if res["max_concurrency"].(float64) != 6 {
		t.Errorf("max_concurrency %v", res["max_concurrency"])
	}
	// Six sessions sending back to back have six requests in flight, the
	// three agents' timelines summed; never more (one session's end and
	// next send never overlap), whatever their windows.
	if res["max_concurrent_requests"].(float64) != 6 {
		t.Errorf("max_concurrent_requests %v, want 6", res["max_concurrent_requests"])
	}
	if d := res["duration"].(float64); d < 1.49 || d > 1.51 {
		t.Errorf("duration %v, want 1.5", d)
	}
}

// TestRunConfigValidate covers the settings a level rejects, those of
// `fleetbench run --agents` (TestRunWithAgentsUsageErrors in package main)
// included.
func TestRunConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*RunConfig)
		want   string // "" for a valid config
	}{
		{"valid", func(*RunConfig) {}, ""},
		{"no out", func(c *RunConfig) { c.OutDir = "" }, "--out DIR is required"},
		{"no load", func(c *RunConfig) { c.Load.Concurrency = 0 }, "set --concurrency N"},
		{"concurrency with rate", func(c *RunConfig) { c.Load.RequestRate = 3 }, "--concurrency is the closed loop's"},
		{"burstiness in closed loop", func(c *RunConfig) { c.Load.Burstiness = 0.5 }, "apply to the open loop"},
		{"target without model", func(c *RunConfig) { c.Client.Model = "" }, "--model is required"},
		{"bad percentiles", func(c *RunConfig) { c.Percentiles = []float64{0, 101} }, "--percentiles"},
		{"ramp-up past warm-up", func(c *RunConfig) { c.RampUp = time.Second }, "--ramp-up must fit"},
		{"simulator time scale", func(c *RunConfig) { c.Client.BaseURL = "" }, "--sim-time-scale"},
		{"half a user model", func(c *RunConfig) { c.Workload.UserModel = &workload.UserModelConfig{URL: "http://u"} }, "go together"},
		{"budget", func(c *RunConfig) { c.Load.TotalRequests = 10 }, "--num-prompts is not supported with --agents"},
		{"open-loop cap", func(c *RunConfig) {
			c.Load = load.Config{RequestRate: 3, MaxConcurrency: 2}
		}, "--max-concurrency is not supported with --agents"},
		{"negative", func(c *RunConfig) { c.Agents = -1 }, "--agents must not be negative"},
		{"open loop", func(c *RunConfig) {
			c.Load = load.Config{RequestRate: 3, Arrival: load.ArrivalPoisson, Burstiness: 1}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := agentsLevel("http://target.test", "out")
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
