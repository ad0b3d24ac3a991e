package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func servingPod(name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm", Labels: map[string]string{"app": "vllm"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// TestPodsListedEveryWindow: the serving pods are found through the API,
// only running and ready ones, and listed again at every Begin, so a
// rollout's new pod is read from the next window on.
func TestPodsListedEveryWindow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total 100\n"+
			"# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total 40\n")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	other := servingPod("vllm-0", "127.0.0.1", false)
	other.Labels = map[string]string{"app": "sglang"}
	cs := fake.NewClientset(servingPod("vllm-1", "127.0.0.1", true), servingPod("vllm-2", "127.0.0.9", false), other)
	s, err := New(Config{Pods: &Pods{Namespace: "llm", Selector: "app=vllm", Port: p}}, nil, WithKubernetes(cs))
	if err != nil {
		t.Fatal(err)
	}
	s.Begin(t.Context())
	want := "http://127.0.0.1:" + port + "/metrics"
	if eps := s.endpoints(); len(eps) != 1 || eps[0] != want {
		t.Fatalf("endpoints %v, want [%s]", eps, want)
	}
	w, err := s.End(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Endpoints) != 1 || w.Endpoints[0].Missing != "" {
		t.Errorf("window endpoints %+v", w.Endpoints)
	}
	// A rollout: a new ready pod appears; the next window reads it too.
	if _, err := cs.CoreV1().Pods("llm").Create(t.Context(), servingPod("vllm-3", "127.0.0.2", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Begin(t.Context())
	if eps := s.endpoints(); len(eps) != 2 || eps[1] != "http://127.0.0.2:"+port+"/metrics" {
		t.Errorf("after the rollout: endpoints %v", eps)
	}
}

// TestPodsForbidden: a Role without list on pods keeps the pods found
// before and says which verb is missing; a bad selector or port is a
// configuration error.
func TestPodsForbidden(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
	})
	_, err := podEndpoints(context.Background(), cs, &Pods{Selector: "app=vllm", Port: 8000})
	if err == nil || !strings.Contains(err.Error(), "needs the verb list on pods") {
		t.Errorf("forbidden: %v", err)
	}
	err = Config{Pods: &Pods{Selector: "app in (", Port: 0, Path: "metrics"}}.WithDefaults().Validate()
	for _, want := range []string{"selector", "port 0", "must begin with /"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v, want %q", err, want)
		}
	}
	if _, err := New(Config{Pods: &Pods{Selector: "app=vllm", Port: 8000}}, nil); err == nil {
		t.Error("pods without a Kubernetes client were accepted")
	}
}
