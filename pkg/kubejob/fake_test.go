package kubejob

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestManagerImagePullFake covers what the kwok nodes cannot produce:
// they never pull images, so an image pull failure is a crafted pod status
// on the fake clientset. The Manager must report it as an event and a
// fatal *Error within seconds.
func TestManagerImagePullFake(t *testing.T) {
	cs, watching := watchedClientset()
	cfg := Config{Namespace: "bench", RunID: "abcde", Image: "registry.invalid/fleetbench:nope", Agents: 1, CoordinatorAddr: "coord:7070"}
	m, err := NewManager(cs, cfg, hclog.NewNullLogger(), WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if _, err := cs.BatchV1().Jobs("bench").Get(ctx, "fleetbench-agents-abcde", metav1.GetOptions{}); err != nil {
		t.Fatalf("get job: %v", err)
	}
	// The fake clientset does not replay to a watch what was created
	// between the informer's list and its watch: create the pod only once
	// the pod watch is open.
	select {
	case <-watching["pods"]:
	case <-ctx.Done():
		t.Fatal("the manager never watched pods")
	}

	p := pod("u1", "0", waiting("ErrImagePull", `failed to pull image "registry.invalid/fleetbench:nope": not found`))
	p.Name = "fleetbench-agents-abcde-0-xyz12"
	p.Labels = map[string]string{LabelAgents: m.JobName()}
	if p, err = cs.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, ctx, m.Events())
	if ev.Kind != KindErrImagePull || ev.Fatal || ev.Index != 0 {
		t.Fatalf("event %+v, want non-fatal ErrImagePull of index 0", ev)
	}
	p.Status = waiting("ImagePullBackOff", `Back-off pulling image "registry.invalid/fleetbench:nope"`)
	if _, err := cs.CoreV1().Pods("bench").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = next(t, ctx, m.Events())
	if ev.Kind != KindImagePullBackOff || !ev.Fatal {
		t.Fatalf("event %+v, want fatal ImagePullBackOff", ev)
	}
	err = m.Wait(ctx)
	var jerr *Error
	if !errors.As(err, &jerr) || jerr.Kind != KindImagePullBackOff || jerr.Pod != p.Name {
		t.Fatalf("Wait() = %v, want an *Error of kind ImagePullBackOff for %s", err, p.Name)
	}
	t.Logf("error: %v", err)

	if err := m.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	m.Close()
	if _, ok := <-m.Events(); ok {
		// Drain: events queued before Close may remain; the channel must
		// still close.
		for range m.Events() {
		}
	}
	if err := m.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

// TestManagerJobExists refuses to adopt another run's Job.
func TestManagerJobExists(t *testing.T) {
	cs := fake.NewClientset()
	cfg := Config{Namespace: "bench", RunID: "abcde", Image: "fleetbench:dev", Agents: 1, CoordinatorAddr: "coord:7070"}
	other := Build(cfg)
	other.Labels[LabelRun] = "other"
	if _, err := cs.BatchV1().Jobs("bench").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(cs, cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(t.Context()); !errors.Is(err, ErrJobExists) {
		t.Errorf("Start = %v, want ErrJobExists", err)
	}
}

// watchedClientset is a fake clientset whose channels (by resource: pods,
// jobs) close when a watch of that resource is open.
func watchedClientset() (*fake.Clientset, map[string]chan struct{}) {
	cs := fake.NewClientset()
	watching := map[string]chan struct{}{"pods": make(chan struct{}), "jobs": make(chan struct{})}
	var once sync.Map
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		if ch, ok := watching[a.GetResource().Resource]; ok {
			if _, done := once.LoadOrStore(a.GetResource().Resource, true); !done {
				close(ch)
			}
		}
		return true, w, nil
	})
	return cs, watching
}

func next(t *testing.T, ctx context.Context, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no event in time")
	}
	return Event{}
}
