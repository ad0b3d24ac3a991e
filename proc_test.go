//go:build integration || e2e || soak

package main

// Processes and servers shared by the tiers that run fleetbench as
// separate processes: integration, e2e and soak.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// proc is one fleetbench process.
type proc struct {
	name       string
	cmd        *exec.Cmd
	out, errb  bytes.Buffer
	done       chan struct{}
	code       int
	startedAt  time.Time
	finishedIn time.Duration
}

// startProc starts fleetbench with args in dir (the test's cwd when "")
// with this process's environment, less the variables in unset, plus set.
func startProc(t *testing.T, ctx context.Context, name, dir string, unset []string, set map[string]string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, os.Args[0], args...)
	p.cmd.Dir = dir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, u := range unset {
			drop = drop || k == u
		}
		if !drop {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, asMainEnv+"=1")
	for k, v := range set {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	p.startedAt = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		p.finishedIn = time.Since(p.startedAt)
	}()
	// A process still running when the test ends is killed and waited
	// for here: the context's kill is asynchronous, and a test binary that
	// exits first leaves it running (a simulator outlived TestSoak so).
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for p to exit and returns its exit code; the test fails
// after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.name, timeout, p.out.String(), p.errb.String())
		return -1
	}
}

func (p *proc) String() string {
	return fmt.Sprintf("%s: exit %d after %v\nstdout:\n%s\nstderr:\n%s", p.name, p.code, p.finishedIn.Round(time.Millisecond), p.out.String(), p.errb.String())
}

// startSim starts the default simulator profile on loopback at time scale
// 20, serving model "sim-model"; it is closed when the test ends.
func startSim(t *testing.T) *sim.Sim {
	t.Helper()
	cfg, err := sim.ProfileConfig(sim.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Model, cfg.TimeScale = "127.0.0.1:0", "sim-model", 20
	s, err := sim.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// agentDone reads an agent's final log line (JSON, as agents log in a
// pod): reports sent and unacked.
func agentDone(log string) (sent, unacked int, ok bool) {
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Message string `json:"@message"`
			Sent    *int   `json:"reports_sent"`
			Unacked int    `json:"reports_unacked"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Message != "agent done" || e.Sent == nil {
			continue
		}
		return *e.Sent, e.Unacked, true
	}
	return 0, 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
