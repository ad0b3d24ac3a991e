package kubejob

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// parseOptions parses args into Options the way a command does: AddFlags
// plus the command's own --agents (default 1).
func parseOptions(t *testing.T, args ...string) Options {
	t.Helper()
	var o Options
	fs := pflag.NewFlagSet("coordinator", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	agents := fs.Int("agents", 1, "")
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.Agents, o.AgentsSet = *agents, fs.Changed("agents")
	return o
}

func TestAddFlags(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	o.AddFlags(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		names = append(names, f.Name)
		if f.Usage == "" {
			t.Errorf("--%s has no help", f.Name)
		}
		if strings.HasSuffix(f.Value.Type(), "Slice") {
			t.Errorf("--%s is a %s: values with commas would be split", f.Name, f.Value.Type())
		}
	})
	want := []string{"agent-api-key-env", "agent-arg", "agent-capacity", "agent-cpu", "agent-host-network", "agent-image", "agent-memory",
		"agent-metrics-port", "agent-mount", "agent-overcommit", "agent-port-range", "agent-pull-policy", "agent-pull-secret", "agent-retries", "agent-secret-env",
		"agent-spread", "api-key-secret", "coordinator-service", "kube-agents", "kube-namespace", "node-selector",
		"pending-timeout", "token-secret", "token-secret-env", "toleration"}
	if !slices.Equal(names, want) {
		t.Errorf("flags %q,\nwant %q (and never --agents: the command owns it)", names, want)
	}
	if o.Spread != string(corev1.ScheduleAnyway) || o.PortRange != DefaultPortRange || o.TokenSecret != DefaultTokenSecret ||
		o.APIKeyEnv != DefaultAPIKeyEnv || o.Service != DefaultCoordinatorService || o.PendingTimeout != DefaultPendingTimeout ||
		o.Retries != DefaultBackoffLimitPerIndex || o.MetricsPort != DefaultAgentMetricsPort || o.Enabled {
		t.Errorf("defaults %+v", o)
	}
}

func TestOptionsAgentCount(t *testing.T) {
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
			cfg, err := parseOptions(t, args...).Config("bench", 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.AgentCount(); got != tt.agents {
				t.Errorf("agents = %d, want %d", got, tt.agents)
			}
		})
	}
}

func TestOptionsConfig(t *testing.T) {
	t.Setenv(EnvPodName, "")
	o := parseOptions(t, "--kube-agents", "--agent-image", "fleetbench:dev", "--agents", "2",
		"--agent-pull-policy", "IfNotPresent", "--agent-pull-secret", "regcred", "--agent-pull-secret", "mirror",
		"--agent-cpu", "2", "--agent-memory", "1Gi", "--node-selector", "pool=load,zone=a", "--toleration", "gpu=true:NoSchedule",
		"--token-secret", "tok/t", "--token-secret-env", "--api-key-secret", "key", "--agent-api-key-env", "KEY",
		"--coordinator-service", "coord.bench.svc:7070", "--pending-timeout", "30s", "--agent-retries", "3",
		"--agent-spread", "DoNotSchedule", "--agent-port-range", "-", "--agent-metrics-port", "9300",
		"--agent-arg=--levels=1,2", "--agent-secret-env", "USER_MODEL_KEY=user-model/key", "--agent-mount", "pvc:sharegpt:/data")
	cfg, err := o.Config("bench", 8)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"namespace", cfg.Namespace == "bench"},
		{"image", cfg.Image == "fleetbench:dev" && cfg.PullPolicy == corev1.PullIfNotPresent},
		{"pull secrets", slices.Equal(cfg.ImagePullSecrets, []string{"regcred", "mirror"})},
		{"agents", cfg.AgentCount() == 2 && cfg.MaxLevel == 8},
		{"resources", cfg.Resources.Requests.Cpu().String() == "2" && cfg.Resources.Limits.Memory().String() == "1Gi"},
		{"node selector", cfg.NodeSelector["pool"] == "load" && cfg.NodeSelector["zone"] == "a"},
		{"tolerations", len(cfg.Tolerations) == 1 && cfg.Tolerations[0].Key == "gpu"},
		{"token", cfg.Token == SecretRef{Name: "tok", Key: "t"} && cfg.TokenAsEnv},
		{"api key", cfg.APIKey == SecretRef{Name: "key", Key: DefaultAPIKeyKey} && cfg.APIKeyEnv == "KEY"},
		{"coordinator", cfg.CoordinatorAddr == "coord.bench.svc:7070"},
		{"pending timeout", cfg.PendingTimeout == 30*time.Second},
		{"retries", cfg.BackoffLimitPerIndex != nil && *cfg.BackoffLimitPerIndex == 3},
		{"spread", cfg.Spread == corev1.DoNotSchedule && cfg.PortRange == "-"},
		{"metrics port", cfg.MetricsPort == 9300},
		{"args", slices.Equal(cfg.Args, []string{"--levels=1,2"})},
		{"env", len(cfg.Env) == 1 && cfg.Env[0].Name == "USER_MODEL_KEY"},
		{"mounts", slices.Equal(cfg.Mounts, []Mount{{Kind: MountPVC, Name: "sharegpt", Path: "/data"}})},
		{"owner", cfg.Owner == nil},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: config %+v", c.what, cfg)
		}
	}
}

// TestOptionsConfigErrors: a bad value fails with the flag's name.
func TestOptionsConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"pull policy", []string{"--agent-pull-policy", "Sometimes"}, "--agent-pull-policy"},
		{"token secret", []string{"--token-secret", "/t"}, "--token-secret"},
		{"api key secret", []string{"--api-key-secret", "key/"}, "--api-key-secret"},
		{"mount", []string{"--agent-mount", "nfs:x:/d"}, "--agent-mount"},
		{"secret env", []string{"--agent-secret-env", "USER_MODEL_KEY"}, "--agent-secret-env"},
		{"cpu", []string{"--agent-cpu", "two"}, "--agent-cpu"},
		{"memory", []string{"--agent-memory", "lots"}, "--agent-memory"},
		{"node selector", []string{"--node-selector", "pool"}, "--node-selector"},
		{"toleration", []string{"--toleration", ":NoSchedule"}, "--toleration"},
		{"spread", []string{"--agent-spread", "Anywhere"}, "spread"},
		{"no image", []string{"--agent-image="}, "image: required"},
		{"capacity too small", []string{"--agents", "1", "--agent-capacity", "4"}, "cannot hold every session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--kube-agents", "--agent-image", "i"}, tt.args...)
			_, err := parseOptions(t, args...).Config("bench", 8)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Config with %q: error %v, want one naming %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestOptionsAgentShare: agents are Burstable by default (1 CPU, 1Gi), and
// a plan that gives each more sessions than its CPU serves is refused with
// the agent count that would fit, unless the user sized the agents
// (--agent-capacity) or overcommits on purpose.
func TestOptionsAgentShare(t *testing.T) {
	base := []string{"--kube-agents", "--agent-image", "fleetbench:dev"}
	cfg, err := parseOptions(t, append(base, "--agents", "2")...).Config("bench", 3000)
	if err != nil {
		t.Fatalf("1,500 sessions per 1-CPU agent: %v", err)
	}
	if cpu := cfg.Resources.Requests.Cpu().String(); cpu != DefaultAgentCPU || cfg.Resources.Limits.Memory().String() != DefaultAgentMemory {
		t.Errorf("default resources %v, want a %s CPU request and a %s memory limit", cfg.Resources, DefaultAgentCPU, DefaultAgentMemory)
	}
	_, err = parseOptions(t, append(base, "--agents", "2")...).Config("bench", 8000)
	if err == nil || !strings.Contains(err.Error(), "each of 2 agents would run 4000 sessions") || !strings.Contains(err.Error(), "--agents 6") {
		t.Errorf("4,000 sessions per 1-CPU agent: %v, want a refusal suggesting --agents 6", err)
	}
	for _, extra := range [][]string{
		{"--agent-cpu", "3"},         // 4,500 per agent
		{"--agent-overcommit"},       // on purpose
		{"--agent-capacity", "4000"}, // the user's own sizing
		{"--agent-cpu", ""},          // BestEffort: nothing to size by
	} {
		if _, err := parseOptions(t, append(append(base, "--agents", "2"), extra...)...).Config("bench", 8000); err != nil {
			t.Errorf("%v: %v", extra, err)
		}
	}
}
