package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
)

// failingBuilder fails the build of the agents in bad with a missing
// dataset, as a real builder does for a wrong path.
func failingBuilder(bad map[int]bool, turns int) func(i int) agent.Builder {
	return func(i int) agent.Builder {
		if !bad[i] {
			return scriptedBuilder(turns, time.Millisecond)
		}
		return func(context.Context, agent.Spec) (agent.Target, error) {
			return agent.Target{}, fmt.Errorf("build workload: open /data/sharegpt.json: %w", fs.ErrNotExist)
		}
	}
}

// perAgent runs a fleet whose agent i builds with builder(i).
func perAgentFleet(n int, cfg coordinator.Config, builder func(i int) agent.Builder, opts func(i int) []agent.Option) fleet {
	return fleet{agents: n, cfg: cfg, agentOpts: opts, builderFor: builder}
}

// TestAgentBuildFailureContinues: one agent of three cannot build its
// engine. It says so at once; under PolicyContinue its share runs on the
// other two, the stage is marked degraded and the result names the agent
// and why. Under PolicyFail the run ends with ErrAgentFailed.
func TestAgentBuildFailureContinues(t *testing.T) {
	cfg := coordinator.Config{
		ReadyTimeout: 20 * time.Second,
		Stages:       []coordinator.Stage{{Level: 6, Duration: time.Second}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	res, err := perAgentFleet(3, cfg, failingBuilder(map[int]bool{2: true}, 2), nil).run(t, ctx)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the run took %v: the coordinator waited instead of acting on the failure", took)
	}
	st := res.Stages[0]
	if !st.Degraded {
		t.Error("the stage is not marked degraded")
	}
	if st.Measured.Counters.Requests == 0 {
		t.Error("the two healthy agents measured nothing")
	}
	var failed *coordinator.AgentStatus
	for i, s := range res.Agents {
		if s.ID == "agent-2" {
			failed = &res.Agents[i]
		} else if s.State != coordinator.StateReady {
			t.Errorf("agent %s state %q, want ready", s.ID, s.State)
		}
	}
	if failed == nil || failed.State != coordinator.StateFailed || failed.Class != agent.ClassDataset ||
		failed.Step != agent.StepBuild || !strings.Contains(failed.Reason, "/data/sharegpt.json") {
		t.Fatalf("agent-2's status = %+v, want failed at build (dataset) naming the path", failed)
	}
	if got := failed.String(); !strings.HasPrefix(got, "agent-2 failed at build (dataset): ") {
		t.Errorf("status line %q", got)
	}

	cfg.OnLoss = coordinator.PolicyFail
	_, err = perAgentFleet(3, cfg, failingBuilder(map[int]bool{1: true}, 2), nil).run(t, ctx)
	if !errors.Is(err, coordinator.ErrAgentFailed) || !strings.Contains(err.Error(), "agent-1") {
		t.Fatalf("PolicyFail: err = %v, want ErrAgentFailed naming agent-1", err)
	}
}

// TestEveryAgentFailsAtOnce: when no agent can build the stage, the run
// ends within seconds (not after the ready timeout) with every agent's
// reason grouped, and each agent's Run returns ErrCannotRun.
func TestEveryAgentFailsAtOnce(t *testing.T) {
	cfg := coordinator.Config{
		ReadyTimeout: 30 * time.Second,
		Stages:       []coordinator.Stage{{Level: 4, Duration: time.Second}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := perAgentFleet(2, cfg, failingBuilder(map[int]bool{0: true, 1: true}, 2), nil).run(t, ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to give up", took)
	}
	var afe *coordinator.AgentsFailedError
	if !errors.As(err, &afe) || len(afe.Groups) != 1 || len(afe.Groups[0].Agents) != 2 {
		t.Fatalf("err = %v, want one group of two agents", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "2 agents (agent-0, agent-1): dataset: ") || !strings.Contains(msg, "file does not exist") {
		t.Errorf("message %q", msg)
	}
}

// TestJoinCheckRefusesBeforeAssigning: agents whose environment check
// fails are refused as they join: no stage is assigned, and the error
// carries their message.
func TestJoinCheckRefusesBeforeAssigning(t *testing.T) {
	cfg := coordinator.Config{
		Spec:   coordinator.Spec{Target: "http://127.0.0.1:1", Model: "m", APIKeyEnv: "FLEETBENCH_TEST_UNSET_KEY", KeyRequired: true},
		Stages: []coordinator.Stage{{Level: 2, Duration: time.Second}},
	}
	var built int
	check := func(_ context.Context, spec agent.Spec) []agent.Problem {
		if !spec.KeyRequired || spec.APIKeyEnv != "FLEETBENCH_TEST_UNSET_KEY" {
			t.Errorf("the agent got spec %+v", spec)
		}
		return []agent.Problem{{Step: agent.StepJoin, Class: agent.ClassCredential, Fatal: true,
			Message: "environment variable FLEETBENCH_TEST_UNSET_KEY is not set on this agent, and the target requires an API key"}}
	}
	builder := func(int) agent.Builder {
		return func(context.Context, agent.Spec) (agent.Target, error) {
			built++
			return agent.Target{}, errors.New("never")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := perAgentFleet(2, cfg, builder, func(int) []agent.Option { return []agent.Option{agent.WithChecker(check)} }).run(t, ctx)
	var afe *coordinator.AgentsFailedError
	if !errors.As(err, &afe) || afe.Groups[0].Step != agent.StepJoin || !strings.Contains(err.Error(), "FLEETBENCH_TEST_UNSET_KEY is not set") {
		t.Fatalf("err = %v, want the agents' join problem", err)
	}
	if built != 0 {
		t.Errorf("%d engines were built: a stage was assigned", built)
	}
}

// TestJoinWarningRuns: a warning at join (no key, none needed) does not
// keep the agent from running, and its status carries it.
func TestJoinWarningRuns(t *testing.T) {
	cfg := coordinator.Config{Stages: []coordinator.Stage{{Level: 2, Duration: 500 * time.Millisecond}}}
	check := func(context.Context, agent.Spec) []agent.Problem {
		return []agent.Problem{{Step: agent.StepJoin, Class: agent.ClassCredential, Message: "no key"}}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := perAgentFleet(1, cfg, func(int) agent.Builder { return scriptedBuilder(2, time.Millisecond) },
		func(int) []agent.Option { return []agent.Option{agent.WithChecker(check)} }).run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Agents[0]; s.State != coordinator.StateReady || len(s.Warnings) != 1 || s.Warnings[0] != "credential: no key" {
		t.Errorf("status %+v", s)
	}
	if res.Stages[0].Measured.Counters.Requests == 0 || res.Stages[0].Degraded {
		t.Errorf("stage: %d requests, degraded %v", res.Stages[0].Measured.Counters.Requests, res.Stages[0].Degraded)
	}
}

// TestFailFastEndsTheStage: every request fails with one class; after
// FailFast the run ends with ErrAllFailed naming the class and an example,
// long before the stage's planned end.
func TestFailFastEndsTheStage(t *testing.T) {
	refused := func(context.Context, agent.Spec) (agent.Target, error) {
		return agent.Target{Source: scriptSource{turns: 2}, Streamer: load.StreamerFunc(func(context.Context, *client.Request) *client.Result {
			time.Sleep(5 * time.Millisecond)
			return &client.Result{Start: time.Now(), Class: client.ClassConnect, Err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
		})}, nil
	}
	cfg := coordinator.Config{
		FailFast: 1500 * time.Millisecond,
		Stages:   []coordinator.Stage{{Level: 2, Warmup: 30 * time.Second, Duration: time.Minute}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := fleet{agents: 2, cfg: cfg, builder: refused}.run(t, ctx)
	if !errors.Is(err, coordinator.ErrAllFailed) || !strings.Contains(err.Error(), "all connect (dial tcp 127.0.0.1:1: connect: connection refused)") {
		t.Fatalf("err = %v, want ErrAllFailed with the class and message", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %v", took)
	}
}
