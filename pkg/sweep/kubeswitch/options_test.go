package kubeswitch_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

func TestNewChecksOptions(t *testing.T) {
	strategic := `{"spec":{"template":{"spec":{"containers":[{"name":"r","env":[{"name":"M","value":"{mode}"}]}]}}}}`
	for _, c := range []struct {
		name    string
		spec    sweep.SwitchSpec
		wantErr string // "" for success
	}{
		{"dynamo minimal", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g"}}, ""},
		{"dynamo all options", sweep.SwitchSpec{Kind: "dynamo", RestartWorkers: true, Timeout: sweep.Duration(60e9), Options: map[string]string{
			"name": "g", "service": "Frontend", "env": "DYN_ROUTER_MODE", "values": "kv=kv, round_robin=round-robin",
			"restart": "always", "workers": "VllmDecodeWorker", "selector": "a={name},b={service}",
			"ready_condition": "Ready", "namespace": "dynamo", "kubeconfig": "/k", "context": "c", "poll_interval": "1s",
		}}, ""},
		{"dynamo without name", sweep.SwitchSpec{Kind: "dynamo"}, "option name is required"},
		{"dynamo misspelled option", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "sevrice": "F"}}, `unknown option "sevrice"`},
		{"dynamo bad restart", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "restart": "sometimes"}}, "option restart"},
		{"dynamo workers without restart", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "workers": "W"}}, "restart_workers"},
		{"dynamo url field", sweep.SwitchSpec{Kind: "dynamo", URL: "http://x", Options: map[string]string{"name": "g"}}, "field url does not apply"},
		{"values not pairs", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "values": "kv"}}, "MODE=VALUE"},
		{"values not one to one", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "values": "a=x,b=x"}}, "both map to"},
		{"bad timeout", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "timeout": "10"}}, "option timeout"},
		{"in_cluster with kubeconfig", sweep.SwitchSpec{Kind: "dynamo", Options: map[string]string{"name": "g", "in_cluster": "true", "kubeconfig": "/k"}}, "in_cluster excludes"},
		{"kubeai minimal", sweep.SwitchSpec{Kind: "kubeai", Options: map[string]string{"name": "m"}}, ""},
		{"kubeai value not a strategy", sweep.SwitchSpec{Kind: "kubeai", Options: map[string]string{"name": "m", "values": "kv=RoundRobin"}}, "not PrefixHash or LeastLoad"},
		{"kubeai restart_frontend", sweep.SwitchSpec{Kind: "kubeai", RestartFrontend: true, Options: map[string]string{"name": "m"}}, "restart_frontend does not apply"},
		{"patch strategic", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{
			"group": "apps", "resource": "deployments", "name": "r", "patch_type": "strategic", "patch": strategic,
			"current": "spec.template.spec.containers[name=r].env[name=M].value", "restart_deployment": "r"}}, ""},
		{"kubernetes alias", sweep.SwitchSpec{Kind: "kubernetes", Options: map[string]string{
			"resource": "configmaps", "name": "c", "patch": "data:\n  mode: '{mode}'\n", "restart_deployment": "router"}}, ""},
		{"patch without patch", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{"resource": "configmaps", "name": "c"}}, "option patch is required"},
		{"patch not an object", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{"resource": "configmaps", "name": "c", "patch": "[1]"}}, "must be an object"},
		{"json patch not a list", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{"resource": "configmaps", "name": "c", "patch_type": "json", "patch": "{}"}}, "list of operations"},
		{"patch bad current", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{"resource": "configmaps", "name": "c", "patch": "{}", "current": "data[x"}}, "option current"},
		{"patch upper-case resource", sweep.SwitchSpec{Kind: "patch", Options: map[string]string{"resource": "Deployment", "name": "c", "patch": "{}"}}, "lower-case plural"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := kubeswitch.New(c.spec, sweep.SwitchEnv{})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("New = %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	kubeswitch.Register()
	kubeswitch.Register() // a second call is a no-op, not a panic
	for _, k := range []string{"dynamo", "kubeai", "patch", "kubernetes"} {
		if !slices.Contains(sweep.Kinds(), k) {
			t.Errorf("kind %s not registered: %v", k, sweep.Kinds())
		}
	}
	// Spec validation reaches the factory: a bad option fails Validate.
	_, err := sweep.NewSwitcher(sweep.SwitchSpec{Kind: "dynamo"}, sweep.SwitchEnv{})
	if err == nil || !strings.Contains(err.Error(), "switch dynamo: option name is required") {
		t.Errorf("NewSwitcher = %v", err)
	}
}

func TestPatchCurrentWithoutPathIsErrNoCurrent(t *testing.T) {
	sw, err := kubeswitch.New(sweep.SwitchSpec{Kind: "patch", Options: map[string]string{
		"resource": "configmaps", "name": "c", "patch": `{"data":{"mode":"{mode}"}}`}}, sweep.SwitchEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Current(t.Context(), sw); !errors.Is(err, sweep.ErrNoCurrent) {
		t.Errorf("Current = %v, want ErrNoCurrent", err)
	}
}
