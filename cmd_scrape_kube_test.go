//go:build e2e

package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
)

// TestRunScrapesPodsOnKubernetes: `run --scrape-pods` finds the serving
// pods through a real API server, only the running and ready ones, and
// reads their /metrics: here the simulator's, whose address the test gives
// the pod objects as their pod IP and port (no kubelet runs them).
func TestRunScrapesPodsOnKubernetes(t *testing.T) {
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))

	s := startSim(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL(), "http://"))

	// Two serving pods, one of them not ready; no scheduler or kubelet
	// touches them (schedulerName none), so their status is the test's.
	for _, p := range []struct {
		name  string
		ready corev1.ConditionStatus
	}{{"sim-ready", corev1.ConditionTrue}, {"sim-starting", corev1.ConditionFalse}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"app": "sim"}},
			Spec:       corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "sim", Image: "fleetbench"}}},
		}
		created, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: p.ready, LastTransitionTime: metav1.Now()}},
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	code, stdout, stderr := runCommand(t.Context(), "--log-level", "warn", "run", "--target", s.URL(), "--model", "sim-model",
		"--concurrency", "4", "--warmup", "1s", "--duration", "3s", "--max-tokens", "16", "--api-key-env", "",
		"--scrape-pods", "app=sim", "--scrape-pods-port", port, "--scrape-pods-namespace", ns, "--scrape-interval", "500ms", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	hit, ok := res["server_hit_rate"].(float64)
	client, _ := res["kv_hit_rate"].(float64)
	if !ok || hit <= 0 || hit-client > 0.02 || client-hit > 0.02 {
		t.Errorf("server_hit_rate %v, client kv_hit_rate %v: want the pod's figure, close to the client's", res["server_hit_rate"], client)
	}
	if m, _ := res["server_missing"].(map[string]any); len(m) != 0 {
		t.Errorf("server_missing %v", m)
	}
	if strings.Contains(stderr, "not listed") {
		t.Errorf("stderr: %s", stderr)
	}
}
