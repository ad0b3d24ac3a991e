//go:build e2e

package main

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// kubeFlagSet parses args with the coordinator command's flags and
// returns its kube options as the command builds them.
func kubeFlagSet(t *testing.T, args ...string) kubejob.Options {
	t.Helper()
	c := &cli{stdout: io.Discard, stderr: io.Discard}
	cmd, o := c.newCoordinator()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	o.kube.Agents, o.kube.AgentsSet = o.cfg.Agents, cmd.Flags().Changed("agents")
	return o.kube
}

// TestKubeFlags: the kube flags parse on the coordinator's command line:
// bools without a value, repeatable flags whose values keep their commas,
// and help without spurious defaults.
func TestKubeFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(o kubejob.Options) bool
	}{
		{"bool without value", []string{"--kube-agents", "--token-secret-env"},
			func(o kubejob.Options) bool { return o.Enabled && o.TokenAsEnv }},
		{"bool false", []string{"--kube-agents=false"}, func(o kubejob.Options) bool { return !o.Enabled }},
		{"defaults", nil, func(o kubejob.Options) bool {
			return !o.Enabled && o.Spread == "ScheduleAnyway" && o.TokenSecret == kubejob.DefaultTokenSecret &&
				o.Retries == kubejob.DefaultBackoffLimitPerIndex && o.PendingTimeout == kubejob.DefaultPendingTimeout &&
				o.Agents == 1 && !o.AgentsSet && o.AgentArgs == nil
		}},
		{"repeated with commas", []string{"--agent-arg=--levels=1,2", "--agent-arg", "--x", "--node-selector", "a=b,c=d"},
			func(o kubejob.Options) bool {
				return slices.Equal(o.AgentArgs, []string{"--levels=1,2", "--x"}) && slices.Equal(o.NodeSelector, []string{"a=b,c=d"})
			}},
		{"typed", []string{"--agent-capacity", "16", "--pending-timeout", "30s", "--agents", "3"}, func(o kubejob.Options) bool {
			return o.Capacity == 16 && o.PendingTimeout == 30*time.Second && o.Agents == 3 && o.AgentsSet
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if o := kubeFlagSet(t, tt.args...); !tt.want(o) {
				t.Errorf("options from %q: %+v", tt.args, o)
			}
		})
	}

	c := &cli{stdout: io.Discard, stderr: io.Discard}
	cmd, _ := c.newCoordinator()
	var help strings.Builder
	help.WriteString(cmd.Flags().FlagUsages())
	for _, bad := range []string{"panic", "(default [])", "(default false)", "(default 0)"} {
		if strings.Contains(help.String(), bad) {
			t.Errorf("help has %q:\n%s", bad, help.String())
		}
	}
	if !strings.Contains(help.String(), `(default "1024 65535")`) {
		t.Errorf("help lacks the port range default:\n%s", help.String())
	}
}

func TestKubeFlagsConfig(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		agents int
	}{
		{"agents flag", []string{"--agents", "3"}, 3},
		{"default agents", nil, 1},
		{"from capacity", []string{"--agent-capacity", "16"}, 7}, // ceil(100/16)
		{"both", []string{"--agents", "8", "--agent-capacity", "16"}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--kube-agents", "--agent-image", "fleetbench:dev"}, tt.args...)
			cfg, err := kubeFlagSet(t, args...).Config("bench", 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.AgentCount(); got != tt.agents {
				t.Errorf("agents = %d, want %d", got, tt.agents)
			}
		})
	}

	f := kubeFlagSet(t, "--kube-agents", "--agent-image", "fleetbench:dev", "--agents", "2",
		"--agent-cpu", "2", "--agent-memory", "1Gi", "--node-selector", "pool=load", "--toleration", "gpu=true:NoSchedule",
		"--token-secret", "tok/t", "--api-key-secret", "key", "--coordinator-service", "coord.bench.svc:7070",
		"--pending-timeout", "30s", "--agent-spread", "DoNotSchedule", "--agent-pull-secret", "regcred",
		"--agent-arg=--endpoint=chat", "--agent-secret-env", "USER_MODEL_KEY=user-model/key",
		"--agent-mount", "pvc:sharegpt:/data")
	cfg, err := f.Config("bench", 8)
	if err != nil {
		t.Fatal(err)
	}
	job := kubejob.Build(cfg)
	pod := job.Spec.Template.Spec
	if pod.NodeSelector["pool"] != "load" || len(pod.Tolerations) != 1 || pod.ImagePullSecrets[0].Name != "regcred" ||
		pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule ||
		cfg.Token != (kubejob.SecretRef{Name: "tok", Key: "t"}) || cfg.APIKey != (kubejob.SecretRef{Name: "key", Key: kubejob.DefaultAPIKeyKey}) ||
		cfg.CoordinatorAddr != "coord.bench.svc:7070" || cfg.PendingTimeout != 30*time.Second ||
		pod.Containers[0].Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("config from flags: %+v", cfg)
	}
	if args := pod.Containers[0].Args; args[len(args)-1] != "--endpoint=chat" {
		t.Errorf("agent args %q, want --endpoint=chat last", args)
	}
	if !slices.ContainsFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool {
		return e.Name == "USER_MODEL_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == "user-model" && e.ValueFrom.SecretKeyRef.Key == "key"
	}) {
		t.Errorf("agent env %+v, want USER_MODEL_KEY from Secret user-model/key", pod.Containers[0].Env)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0] != (kubejob.Mount{Kind: kubejob.MountPVC, Name: "sharegpt", Path: "/data"}) {
		t.Errorf("mounts %+v, want the sharegpt claim at /data", cfg.Mounts)
	}
	if _, err := kubeFlagSet(t, "--kube-agents", "--agent-image", "i", "--agent-mount", "nfs:x:/d").Config("bench", 8); err == nil {
		t.Error("--agent-mount nfs:x:/d accepted")
	}
	for _, bad := range []string{"USER_MODEL_KEY", "=x/y", "A B=x"} {
		if _, err := kubeFlagSet(t, "--kube-agents", "--agent-image", "i", "--agent-secret-env", bad).Config("bench", 8); err == nil {
			t.Errorf("--agent-secret-env %q accepted", bad)
		}
	}

	if _, err := kubeFlagSet(t, "--kube-agents").Config("bench", 8); err == nil {
		t.Error("config without --agent-image succeeded, want an error")
	}
}

// TestStartKubeAgents runs the coordinator's wiring against the real
// control plane: the Job is sized from the stages, its pods run and
// complete, and stop (what a signal leads to) deletes it.
func TestStartKubeAgents(t *testing.T) {
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))
	t.Setenv(kubejob.EnvPodName, "")
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})

	t.Run("runs and deletes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		f := kubeFlagSet(t, "--kube-agents", "--kube-namespace", ns, "--agent-image", "fleetbench.invalid/fleetbench:test",
			"--agent-capacity", "4", "--coordinator-service", "coord:7070")
		cfg := coordinator.Config{Stages: []coordinator.Stage{{Level: 4}, {Level: 8}}}
		runCtx, agents, err := fleet.StartKube(ctx, logger, f, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Agents != 2 {
			t.Errorf("cfg.Agents = %d, want 2 (ceil(8/4))", cfg.Agents)
		}
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(jobs.Items) != 1 {
			t.Fatalf("jobs %v, %v; want one", jobs, err)
		}
		name := jobs.Items[0].Name
		if _, err := kubetest.WaitJob(ctx, cs, ns, name); err != nil {
			t.Fatal(err)
		}
		agents.Stop()
		if _, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("job after stop: %v, want NotFound", err)
		}
		if err := kubejob.Cause(runCtx, context.Canceled); !errors.Is(err, context.Canceled) {
			t.Errorf("Cause after a clean run = %v, want the run's own error", err)
		}
	})

	t.Run("fatal cancels the run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		f := kubeFlagSet(t, "--kube-agents", "--kube-namespace", ns, "--agent-image", "fleetbench.invalid/fleetbench:test",
			"--agents", "1", "--node-selector", kubetest.FakeNodeLabel+"=none", "--pending-timeout", "2s")
		cfg := coordinator.Config{Stages: []coordinator.Stage{{Level: 4}}}
		runCtx, agents, err := fleet.StartKube(ctx, logger, f, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer agents.Stop()
		select {
		case <-runCtx.Done():
		case <-ctx.Done():
			t.Fatal("run not canceled by an unschedulable agent")
		}
		var kerr *kubejob.Error
		if err := kubejob.Cause(runCtx, context.Canceled); !errors.As(err, &kerr) || kerr.Kind != kubejob.KindPendingTooLong {
			t.Errorf("Cause = %v, want a PendingTooLong *kubejob.Error", err)
		}
	})
}

// TestAgentImageDefaultsToOwn: without --agent-image the agents run the
// image of the coordinator's own pod (found through the downward API's
// POD_NAMESPACE and POD_NAME), and the Job is owned by that pod.
func TestAgentImageDefaultsToOwn(t *testing.T) {
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const image = "registry.invalid/fleetbench@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "coordinator"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coordinator", Image: image}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv(kubejob.EnvPodName, pod.Name)
	t.Setenv(kubejob.EnvPodUID, string(pod.UID))
	f := kubeFlagSet(t, "--kube-agents", "--agents", "1")
	cfg := coordinator.Config{Stages: []coordinator.Stage{{Level: 4}}}
	_, agents, err := fleet.StartKube(ctx, hclog.NewNullLogger(), f, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer agents.Stop()
	jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs %v, %v; want one", jobs, err)
	}
	j := jobs.Items[0]
	if got := j.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("agent image %q, want the coordinator pod's %q", got, image)
	}
	if refs := j.OwnerReferences; len(refs) != 1 || refs[0].UID != pod.UID {
		t.Errorf("job owners %+v, want the coordinator pod", refs)
	}
}
