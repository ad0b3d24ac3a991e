//go:build e2e

package kubeswitch_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

func TestKubeAISwitch(t *testing.T) {
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	installCRD(t, cfg, "testdata/model-crd.yaml", kubeswitch.ModelResource, ns)
	sa := coordinatorConfig(t, cfg, ns)
	dyn := dynamic.NewForConfigOrDie(cfg)
	cs := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	res := dyn.Resource(kubeswitch.ModelResource).Namespace(ns)
	model := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeai.org/v1",
		"kind":       "Model",
		"metadata":   map[string]any{"name": "llama"},
		"spec": map[string]any{
			"url": "hf://RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "engine": "VLLM",
			"features": []any{"TextGeneration"}, "replicas": int64(2),
		},
	}}
	if _, err := res.Create(ctx, model, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubeai's model pods, by the label it puts on them.
	labels := map[string]string{"model": "llama"}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("model-llama", "server", 2, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(ctx, t, cs, ns, "model-llama")
	setReady := func(n int64) {
		t.Helper()
		m, err := res.Get(ctx, "llama", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedMap(m.Object, map[string]any{"all": int64(2), "ready": n}, "status", "replicas")
		if _, err := res.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady(0)

	sw := newSwitch(t, sa, kubeswitch.KindKubeAI, ns, map[string]string{"name": "llama"})
	if cur, err := sweep.Current(ctx, sw); err != nil || cur != "round_robin" {
		t.Fatalf("Current of the CRD's default = %q, %v; want round_robin (LeastLoad)", cur, err)
	}

	t.Run("switch waits for ready replicas", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- sw.Switch(ctx, "kv") }()
		select {
		case err := <-done:
			t.Fatalf("Switch returned %v with 0 of 2 replicas ready", err)
		case <-time.After(time.Second):
		}
		setReady(2)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		m, err := res.Get(ctx, "llama", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s, _, _ := unstructured.NestedString(m.Object, "spec", "loadBalancing", "strategy"); s != "PrefixHash" {
			t.Errorf("strategy = %q, want PrefixHash", s)
		}
		if cur, err := sweep.Current(ctx, sw); err != nil || cur != "kv" {
			t.Errorf("Current = %q, %v; want kv", cur, err)
		}
	})

	t.Run("restart_workers replaces the model pods", func(t *testing.T) {
		sw := newSwitch(t, sa, kubeswitch.KindKubeAI, ns, map[string]string{"name": "llama", "restart_workers": "true"})
		before := uids(pods(ctx, t, cs, ns, "model=llama"))
		if err := sw.Switch(ctx, "round_robin"); err != nil {
			t.Fatal(err)
		}
		after := pods(ctx, t, cs, ns, "model=llama")
		if len(after) != 2 {
			t.Fatalf("model pods = %d, want 2", len(after))
		}
		for _, p := range after {
			if before[p.UID] {
				t.Errorf("pod %s was not restarted", p.Name)
			}
		}
		if cur, err := sweep.Current(ctx, sw); err != nil || cur != "round_robin" {
			t.Errorf("Current = %q, %v; want round_robin", cur, err)
		}
	})

	t.Run("a mode with no strategy is refused", func(t *testing.T) {
		if err := sw.Switch(ctx, "random"); err == nil {
			t.Error("Switch to a mode that maps to no kubeai strategy succeeded")
		}
	})
}
