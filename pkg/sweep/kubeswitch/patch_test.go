//go:build e2e

package kubeswitch_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

// TestPatchSwitch switches a router Deployment's env with a strategic merge
// patch, as deploy/examples/vllm does, on a real Deployment that the
// controller-manager rolls out and kwok runs.
func TestPatchSwitch(t *testing.T) {
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	sa := coordinatorConfig(t, cfg, ns)
	cs := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	labels := map[string]string{"app": "router"}
	d := deployment("router", "router", 2, labels,
		corev1.EnvVar{Name: "LOG", Value: "info"},
		corev1.EnvVar{Name: "ROUTING_LOGIC", Value: "roundrobin"})
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(ctx, t, cs, ns, "router")

	opts := map[string]string{
		"group": "apps", "version": "v1", "resource": "deployments", "name": "router",
		"patch_type": "strategic",
		"patch":      `{"spec":{"template":{"spec":{"containers":[{"name":"router","env":[{"name":"ROUTING_LOGIC","value":"{mode}"}]}]}}}}`,
		"values":     "kv=prefixaware,round_robin=roundrobin",
		"current":    "spec.template.spec.containers[name=router].env[name=ROUTING_LOGIC].value",
	}
	// "kubernetes" is the alias of "patch".
	sw := newSwitch(t, sa, kubeswitch.KindKubernetes, ns, opts)
	if cur, err := sweep.Current(ctx, sw); err != nil || cur != "round_robin" {
		t.Fatalf("Current = %q, %v; want round_robin", cur, err)
	}

	t.Run("patch and wait for the rollout", func(t *testing.T) {
		if err := sw.Switch(ctx, "kv"); err != nil {
			t.Fatal(err)
		}
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rolledOut(got) {
			t.Errorf("Switch returned before the rollout finished: %+v", got.Status)
		}
		ps := pods(ctx, t, cs, ns, "app=router")
		for _, p := range ps {
			if envOf(p, "router", "ROUTING_LOGIC") != "prefixaware" || envOf(p, "router", "LOG") != "info" {
				t.Errorf("pods after the switch: %s", describe(ps, "router", "ROUTING_LOGIC"))
			}
		}
		if cur, err := sweep.Current(ctx, sw); err != nil || cur != "kv" {
			t.Errorf("Current = %q, %v; want kv", cur, err)
		}
	})

	t.Run("rollout restart replaces pods when nothing changed", func(t *testing.T) {
		o := map[string]string{"restart_deployment": "router"}
		for k, v := range opts {
			o[k] = v
		}
		sw := newSwitch(t, sa, kubeswitch.KindPatch, ns, o)
		before := uids(pods(ctx, t, cs, ns, "app=router"))
		if err := sw.Switch(ctx, "kv"); err != nil {
			t.Fatal(err)
		}
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Template.Annotations[kubeswitch.RestartedAtAnnotation] == "" {
			t.Error("no restartedAt annotation on the pod template")
		}
		after := pods(ctx, t, cs, ns, "app=router")
		if len(after) != 2 {
			t.Fatalf("pods = %d, want 2", len(after))
		}
		for _, p := range after {
			if before[p.UID] {
				t.Errorf("pod %s was not replaced", p.Name)
			}
		}
	})

	t.Run("json patch", func(t *testing.T) {
		sw := newSwitch(t, sa, kubeswitch.KindPatch, ns, map[string]string{
			"group": "apps", "resource": "deployments", "name": "router", "patch_type": "json",
			"patch":   `[{"op": "add", "path": "/spec/template/metadata/labels/mode", "value": "{mode}"}]`,
			"current": "spec.template.metadata.labels.mode",
		})
		if err := sw.Switch(ctx, "round_robin"); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods(ctx, t, cs, ns, "app=router") {
			if p.Labels["mode"] != "round_robin" {
				t.Errorf("pod %s labels %v, want mode=round_robin after the rollout", p.Name, p.Labels)
			}
		}
		if cur, err := sweep.Current(ctx, sw); err != nil || cur != "round_robin" {
			t.Errorf("Current = %q, %v; want round_robin", cur, err)
		}
	})
}
