package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// freeAddr is testserve.FreeAddr.
func freeAddr(t *testing.T) string { return testserve.FreeAddr(t) }

// TestServeStopsGracefully runs one stage with an external agent: Serve
// returns the stage's measurement, and the agent hears the run's stop
// before the server goes away (its Run returns nil). An agent whose
// stream were cut first would keep reconnecting to a server that is gone.
func TestServeStopsGracefully(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	addr := freeAddr(t)
	logger := hclog.New(&hclog.LoggerOptions{Output: t.Output(), Level: hclog.Warn})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	wl := workload.Config{Kind: workload.KindDocChat, MaxTokens: 16, Documents: 2, PromptTokens: 300, Turns: workload.Turns{Min: 2, Max: 3}}
	a, err := agent.New(agent.Config{ID: "remote-0", Coordinator: addr, Token: "serve-token", ReportInterval: 100 * time.Millisecond},
		agent.ClientBuilder(logger, agent.ClientOptions{APIKeyEnv: "FLEETBENCH_TEST_KEY"}), logger)
	if err != nil {
		t.Fatal(err)
	}
	agentErr := make(chan error, 1)
	go func() { agentErr <- a.Run(ctx) }()

	res, err := Serve(ctx, logger, ServeConfig{
		Coordinator: coordinator.Config{
			Agents: 1, Spec: coordinator.Spec{Target: srv.URL, Model: "m", Workload: wl},
			Stages: []coordinator.Stage{{Level: 2, Warmup: 200 * time.Millisecond, Duration: 600 * time.Millisecond}},
		},
		Listen: addr, Server: coordinator.ServerConfig{Token: "serve-token"},
	})
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	st := StageResult(res, 0)
	if st == nil {
		t.Fatalf("no stage 0 in %+v", res)
	}
	m, err := MeasureStage(res, st)
	if err != nil || m.Window.Counters.Requests == 0 || m.Agents != 1 {
		t.Errorf("measurement %+v, %v: want requests from one agent", m, err)
	}
	select {
	case err := <-agentErr:
		if err != nil {
			t.Errorf("agent: %v, want nil (stopped by the coordinator)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not hear the stop: it is still running after the server stopped")
	}
}
