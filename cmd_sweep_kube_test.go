//go:build e2e

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// kubeSweep is a sweep against a target only the (never running) agent
// pods would reach.
const kubeSweep = `
target: http://model.invalid:8000
model: m
workload:
  prompt_tokens: 400
  turns: 2
  max_tokens: 16
levels: [4, 12]
modes: [{name: kv}, {name: round_robin}]
switch:
  kind: exec
  command: ["true"]
warmup: 1s
measure: 2s
snapshots: 1
cooldown: 0s
switch_estimate: 1s
agents: 2
readiness:
  skip: true
`

// TestSweepRegistersKubeSwitches: a sweep file with a Kubernetes switch
// kind validates (the vLLM example's patch switch).
func TestSweepRegistersKubeSwitches(t *testing.T) {
	code, stdout, stderr := runCommand(t.Context(), "sweep", "-f", filepath.Join("deploy", "examples", "vllm", "sweep.yaml"), "--dry-run")
	if code != exitOK {
		t.Fatalf("sweep --dry-run of the patch-switch example: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestSweepKubeAgents runs `fleetbench sweep --kube-agents` against the
// real control plane. kwok's pods run no process, so no agent ever joins:
// the sweep must create the agents' Job with the agent count the flags
// ask for, serve its metrics meanwhile, then fail with a clear error when
// the join timeout passes (or stop when ctx is canceled), and delete the
// Job on either exit.
func TestSweepKubeAgents(t *testing.T) {
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))
	t.Setenv(kubejob.EnvPodName, "")
	t.Setenv(tokenEnv, "kube-sweep-token")

	tests := []struct {
		name     string
		args     []string
		agents   int32
		cancel   bool // cancel ctx once the Job exists
		wantCode int
		wantErr  string // in stderr
	}{
		{name: "join timeout", args: []string{"--join-timeout", "4s"}, agents: 2, wantCode: exitError, wantErr: "wait for agents: 0 of 2 joined in 4s"},
		// ceil(12 / 4) agents.
		{name: "canceled", args: []string{"--agent-capacity", "4"}, agents: 3, cancel: true, wantCode: exitInterrupted, wantErr: "interrupted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := writeSweepFile(t, dir, kubeSweep)
			metricsAddr := freeAddr(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			runCtx, cancelRun := context.WithCancel(ctx)
			defer cancelRun()

			var (
				wg      sync.WaitGroup
				jobName string
				par     int32
				scraped string
			)
			wg.Go(func() {
				jobName, par = waitAgentsJob(ctx, t, cs, ns)
				scraped = scrapeUntil(ctx, "http://"+metricsAddr+"/metrics", "fleetbench_coordinator_agents_connected")
				if tt.cancel {
					cancelRun()
				}
			})
			args := append([]string{"sweep", "-f", spec, "--out", filepath.Join(dir, "out"), "--kube-agents",
				"--kube-namespace", ns, "--agent-image", "fleetbench.invalid/fleetbench:test",
				"--listen", freeAddr(t), "--metrics-listen", metricsAddr,
				"--skip-preflight"}, tt.args...) // the target is a placeholder: the agents are what is tested
			code, stdout, stderr := runCommand(runCtx, args...)
			wg.Wait()
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("sweep exit %d, want %d saying %q\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, tt.wantErr, stdout, stderr)
			}
			if jobName == "" {
				t.Fatal("no agents job was created")
			}
			if par != tt.agents {
				t.Errorf("job parallelism %d, want %d agents", par, tt.agents)
			}
			for _, want := range []string{"fleetbench_coordinator_agents_connected 0", "fleetbench_sweep_level 0",
				"fleetbench_sweep_points_done_total 0"} {
				if !strings.Contains(scraped, want) {
					t.Errorf("/metrics during the join wait lacks %q:\n%s", want, scraped)
				}
			}
			jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs.Items {
				if j.DeletionTimestamp == nil {
					t.Errorf("job %s still there after the sweep ended", j.Name)
				}
			}
		})
	}
}

// waitAgentsJob returns the name and parallelism of the first Job that
// appears in ns.
func waitAgentsJob(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) (string, int32) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(jobs.Items) > 0 {
			j := jobs.Items[0]
			var p int32
			if j.Spec.Parallelism != nil {
				p = *j.Spec.Parallelism
			}
			return j.Name, p
		}
		select {
		case <-ctx.Done():
			t.Errorf("wait for the agents job: %v", ctx.Err())
			return "", 0
		case <-tick.C:
		}
	}
}

// scrapeUntil GETs url until the body contains want (or ctx ends) and
// returns the last body.
func scrapeUntil(ctx context.Context, url, want string) string {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err.Error()
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if strings.Contains(last, want) {
				return last
			}
		}
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
	}
}
