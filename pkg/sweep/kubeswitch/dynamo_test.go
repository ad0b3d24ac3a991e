//go:build e2e

package kubeswitch_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

// Labels Dynamo's operator puts on a service's pods.
const (
	labelDGD       = "nvidia.com/dynamo-graph-deployment-name"
	labelComponent = "nvidia.com/dynamo-component"
)

// fakeOperator plays Dynamo's operator for one DGD: it keeps one Deployment
// per service whose "main" container has the service's env (graph envs,
// then service envs, then mainContainer.env, as the operator merges them),
// so a changed env rolls the pods through the real Deployment controller;
// and it sets the DGD's Ready condition, for the current generation, to
// whether every Deployment has rolled out.
type fakeOperator struct {
	dyn  dynamic.Interface
	cs   kubernetes.Interface
	ns   string
	name string
}

func (f *fakeOperator) run(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := f.reconcile(ctx); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			t.Errorf("fake operator: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (f *fakeOperator) reconcile(ctx context.Context) error {
	res := f.dyn.Resource(kubeswitch.DGDResource).Namespace(f.ns)
	dgd, err := res.Get(ctx, f.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	graphEnvs, _, _ := unstructured.NestedSlice(dgd.Object, "spec", "envs")
	services, _, _ := unstructured.NestedMap(dgd.Object, "spec", "services")
	ready := true
	for name, s := range services {
		svc := s.(map[string]any)
		env := mergeEnv(graphEnvs)
		list, _, _ := unstructured.NestedSlice(svc, "envs")
		env = mergeEnvInto(env, list)
		list, _, _ = unstructured.NestedSlice(svc, "extraPodSpec", "mainContainer", "env")
		env = mergeEnvInto(env, list)
		replicas := int32(1)
		if n, ok, _ := unstructured.NestedInt64(svc, "replicas"); ok {
			replicas = int32(n)
		}
		dname := f.name + "-" + lower(name)
		d, err := f.cs.AppsV1().Deployments(f.ns).Get(ctx, dname, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d = deployment(dname, "main", replicas, map[string]string{labelDGD: f.name, labelComponent: name}, env...)
			if _, err := f.cs.AppsV1().Deployments(f.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				return err
			}
			ready = false
			continue
		case err != nil:
			return err
		}
		if !reflect.DeepEqual(d.Spec.Template.Spec.Containers[0].Env, env) {
			d.Spec.Template.Spec.Containers[0].Env = env
			if _, err := f.cs.AppsV1().Deployments(f.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				return err
			}
			ready = false
			continue
		}
		ready = ready && rolledOut(d)
	}
	status, reason := "False", "Pending"
	if ready {
		status, reason = "True", "AllServicesReady"
	}
	conds, _, _ := unstructured.NestedSlice(dgd.Object, "status", "conditions")
	if len(conds) == 1 {
		c := conds[0].(map[string]any)
		og, _, _ := unstructured.NestedInt64(c, "observedGeneration")
		if c["status"] == status && og == dgd.GetGeneration() {
			return nil
		}
	}
	_ = unstructured.SetNestedSlice(dgd.Object, []any{map[string]any{
		"type": "Ready", "status": status, "reason": reason, "message": "fake operator",
		"observedGeneration": dgd.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions")
	state := "pending"
	if ready {
		state = "successful"
	}
	_ = unstructured.SetNestedField(dgd.Object, state, "status", "state")
	_, err = res.UpdateStatus(ctx, dgd, metav1.UpdateOptions{})
	return err
}

func mergeEnv(list []any) []corev1.EnvVar { return mergeEnvInto(nil, list) }

// mergeEnvInto sets each variable of list in env, replacing one of the same
// name in place.
func mergeEnvInto(env []corev1.EnvVar, list []any) []corev1.EnvVar {
	for _, e := range list {
		em := e.(map[string]any)
		name, _ := em["name"].(string)
		value, _ := em["value"].(string)
		found := false
		for i := range env {
			if env[i].Name == name {
				env[i].Value, found = value, true
			}
		}
		if !found {
			env = append(env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	return env
}

// dynamoEnv starts a namespace with the DGD CRD, the coordinator's Role, a
// DGD named graph with a Frontend (2 replicas) and a worker service (2
// replicas), and the fake operator, and waits until the DGD is Ready.
func dynamoEnv(t *testing.T) (ns string, sa *rest.Config, dyn dynamic.Interface, cs kubernetes.Interface) {
	t.Helper()
	cfg := kubetest.Env(t)
	ns = kubetest.Namespace(t, cfg)
	installCRD(t, cfg, "testdata/dgd-crd.yaml", kubeswitch.DGDResource, ns)
	sa = coordinatorConfig(t, cfg, ns)
	dyn = dynamic.NewForConfigOrDie(cfg)
	cs = kubetest.Client(t, cfg)

	dgd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1alpha1",
		"kind":       "DynamoGraphDeployment",
		"metadata":   map[string]any{"name": "graph"},
		"spec": map[string]any{
			"backendFramework": "vllm",
			"envs":             []any{map[string]any{"name": "DYN_LOG", "value": "info"}},
			"services": map[string]any{
				"Frontend": map[string]any{
					"componentType": "frontend",
					"replicas":      int64(2),
					// The variable is not first: the switch must find it by
					// name and leave OTHER alone.
					"envs": []any{
						map[string]any{"name": "OTHER", "value": "x"},
						map[string]any{"name": "DYN_ROUTER_MODE", "value": "round-robin"},
					},
					"extraPodSpec": map[string]any{"mainContainer": map[string]any{"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0"}},
				},
				"VllmDecodeWorker": map[string]any{
					"componentType": "worker",
					"replicas":      int64(2),
				},
			},
		},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := dyn.Resource(kubeswitch.DGDResource).Namespace(ns).Create(ctx, dgd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opCtx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		(&fakeOperator{dyn: dyn, cs: cs, ns: ns, name: "graph"}).run(opCtx, t)
	}()
	t.Cleanup(func() { stop(); wg.Wait() })
	err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		d, err := dyn.Resource(kubeswitch.DGDResource).Namespace(ns).Get(ctx, "graph", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, _, _ := unstructured.NestedString(d.Object, "status", "state")
		return s == "successful", nil
	})
	if err != nil {
		t.Fatalf("wait for the DGD to be Ready: %v", err)
	}
	return ns, sa, dyn, cs
}

func TestDynamoSwitch(t *testing.T) {
	ns, sa, dyn, cs := dynamoEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sw := newSwitch(t, sa, kubeswitch.KindDynamo, ns, map[string]string{"name": "graph"})
	frontendSel := labelDGD + "=graph," + labelComponent + "=Frontend"
	workerSel := labelDGD + "=graph," + labelComponent + "=VllmDecodeWorker"

	cur, err := sweep.Current(ctx, sw)
	if err != nil || cur != "round_robin" {
		t.Fatalf("Current = %q, %v; want round_robin", cur, err)
	}

	t.Run("switch rolls the frontend and confirms the value", func(t *testing.T) {
		workersBefore := uids(pods(ctx, t, cs, ns, workerSel))
		if err := sw.Switch(ctx, "kv"); err != nil {
			t.Fatal(err)
		}
		// When Switch returns, every running frontend pod carries the new
		// value: the switch waited for the rollout, not just the patch.
		ps := pods(ctx, t, cs, ns, frontendSel)
		if len(ps) != 2 {
			t.Fatalf("frontend pods = %d, want 2", len(ps))
		}
		for _, p := range ps {
			if envOf(p, "main", "DYN_ROUTER_MODE") != "kv" || envOf(p, "main", "OTHER") != "x" {
				t.Errorf("pod %s env: %s", p.Name, describe(ps, "main", "DYN_ROUTER_MODE"))
			}
		}
		dgd, err := dyn.Resource(kubeswitch.DGDResource).Namespace(ns).Get(ctx, "graph", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		envs, _, _ := unstructured.NestedSlice(dgd.Object, "spec", "services", "Frontend", "envs")
		if len(envs) != 2 || envs[0].(map[string]any)["value"] != "x" || envs[1].(map[string]any)["value"] != "kv" {
			t.Errorf("Frontend envs = %v, want OTHER=x kept and DYN_ROUTER_MODE=kv", envs)
		}
		conds, _, _ := unstructured.NestedSlice(dgd.Object, "status", "conditions")
		if c := conds[0].(map[string]any); c["status"] != "True" || c["observedGeneration"] != dgd.GetGeneration() {
			t.Errorf("Ready condition %v at generation %d", c, dgd.GetGeneration())
		}
		if !equalUIDs(workersBefore, uids(pods(ctx, t, cs, ns, workerSel))) {
			t.Error("workers were restarted without restart_workers")
		}
		if cur, err := sweep.Current(ctx, sw); err != nil || cur != "kv" {
			t.Errorf("Current = %q, %v; want kv", cur, err)
		}
	})

	t.Run("restart always and restart_workers replace every pod", func(t *testing.T) {
		sw := newSwitch(t, sa, kubeswitch.KindDynamo, ns, map[string]string{
			"name": "graph", "restart": "always", "restart_workers": "true",
		})
		frontBefore := uids(pods(ctx, t, cs, ns, frontendSel))
		workersBefore := uids(pods(ctx, t, cs, ns, workerSel))
		if err := sw.Switch(ctx, "kv"); err != nil { // the value is already kv
			t.Fatal(err)
		}
		front := pods(ctx, t, cs, ns, frontendSel)
		workers := pods(ctx, t, cs, ns, workerSel)
		if len(front) != 2 || len(workers) != 2 {
			t.Fatalf("pods: %d frontend, %d workers; want 2 and 2", len(front), len(workers))
		}
		for _, p := range append(front, workers...) {
			if frontBefore[p.UID] || workersBefore[p.UID] {
				t.Errorf("pod %s was not restarted", p.Name)
			}
		}
	})

	t.Run("restore to round robin", func(t *testing.T) {
		if err := sw.Switch(ctx, "round_robin"); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods(ctx, t, cs, ns, frontendSel) {
			if v := envOf(p, "main", "DYN_ROUTER_MODE"); v != "round-robin" {
				t.Errorf("pod %s has %q", p.Name, v)
			}
		}
	})

	t.Run("unknown service", func(t *testing.T) {
		sw := newSwitch(t, sa, kubeswitch.KindDynamo, ns, map[string]string{"name": "graph", "service": "Router"})
		err := sw.Switch(ctx, "kv")
		if err == nil || !strings.Contains(err.Error(), `no service "Router"`) {
			t.Errorf("Switch with an unknown service: %v", err)
		}
	})

	t.Run("timeout names what was awaited", func(t *testing.T) {
		// Nothing labels pods this way, so the wait cannot end.
		sw := newSwitch(t, sa, kubeswitch.KindDynamo, ns, map[string]string{
			"name": "graph", "selector": "app=nothing-{service}", "timeout": "1s",
		})
		err := sw.Switch(ctx, "kv")
		if err == nil || !strings.Contains(err.Error(), "Frontend pods: 0 of 2 ready") || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("Switch = %v, want a timeout naming the frontend pods", err)
		}
	})
}

func equalUIDs[K comparable](a, b map[K]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
