//go:build e2e

package kubejob_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// These tests run the Manager against the real control plane of
// scripts/kube-env.sh: the Job controller makes the indexed pods, the
// scheduler places them on kwok nodes, kwok runs, fails or OOM-kills them,
// and the garbage collector removes what is deleted.

func config(ns string, agents int) kubejob.Config {
	return kubejob.Config{
		Namespace:       ns,
		Image:           "fleetbench.invalid/fleetbench:test",
		Agents:          agents,
		CoordinatorAddr: "fleetbench-coordinator." + ns + ".svc:7070",
		Token:           kubejob.SecretRef{Name: "fleetbench-agent-token"},
		PendingTimeout:  20 * time.Second,
	}
}

// mark applies a kubetest marker (Fail, OOMKill, RunFor) to the pods of cfg.
func mark(cfg *kubejob.Config, f func(*metav1.ObjectMeta)) {
	var m metav1.ObjectMeta
	f(&m)
	cfg.Labels = mergeMaps(cfg.Labels, m.Labels)
	cfg.Annotations = mergeMaps(cfg.Annotations, m.Annotations)
}

func mergeMaps(a, b map[string]string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, b)
	return a
}

func newManager(t *testing.T, cs kubernetes.Interface, cfg kubejob.Config) *kubejob.Manager {
	t.Helper()
	m, err := kubejob.NewManager(cs, cfg, hclog.New(&hclog.LoggerOptions{Output: hclog.DefaultOutput, Level: hclog.Debug}),
		kubejob.WithCheckInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// until reads events until stop returns true, and returns them.
func until(t *testing.T, ctx context.Context, m *kubejob.Manager, stop func(kubejob.Event) bool) []kubejob.Event {
	t.Helper()
	var got []kubejob.Event
	for {
		select {
		case ev, ok := <-m.Events():
			if !ok {
				t.Fatalf("events closed; got %v", got)
			}
			t.Logf("%s: %s", time.Now().Format("15:04:05.000"), ev)
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("waiting for events: %v; got %v", ctx.Err(), got)
		}
	}
}

// coordinatorAccount makes a ServiceAccount with the Role deploy/base
// gives the coordinator for its agents (jobs and pods), and returns a
// config that authenticates as it, so the tests also prove least privilege.
func coordinatorAccount(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) *rest.Config {
	t.Helper()
	admin := kubetest.Client(t, cfg)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coordinator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "coordinator"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "coordinator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "coordinator"}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saCfg, err := kubetest.ImpersonateServiceAccount(ctx, cfg, ns, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubetest.Client(t, saCfg)
	if err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("wait for the role to apply: %v", err)
	}
	return saCfg
}

// gone waits until the Job and its pods no longer exist.
func gone(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, job string) {
	t.Helper()
	err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelAgents + "=" + job})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("wait for job %s and its pods to be gone: %v", job, err)
	}
}

// TestAgentsJobRuns creates the agents' Job as the coordinator's
// ServiceAccount, follows its pods to Running and Succeeded, checks the
// Job and pods the cluster made, and deletes them.
func TestAgentsJobRuns(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	admin := kubetest.Client(t, restCfg)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs := kubetest.Client(t, coordinatorAccount(t, ctx, restCfg, ns))
	// The agents' pods must pass the strictest Pod Security level: the
	// Job controller could not create them otherwise.
	nsObj, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := admin.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Documents for the workload, mounted read-only in every agent.
	docs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "docs"}, Data: map[string]string{"a.txt": "A document."}}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, docs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := config(ns, 3)
	cfg.Spread = corev1.DoNotSchedule
	cfg.AgentCapacity, cfg.MaxLevel = 10, 30
	cfg.Mounts = []kubejob.Mount{{Kind: kubejob.MountConfigMap, Name: "docs", Path: "/docs"}}
	mark(&cfg, func(m *metav1.ObjectMeta) { kubetest.RunFor(m, 2*time.Second) })
	m := newManager(t, cs, cfg)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	evs := until(t, ctx, m, func(ev kubejob.Event) bool { return ev.Kind == kubejob.KindJobComplete || ev.Fatal })
	if err := m.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
	byKind := map[kubejob.Kind][]int{}
	for _, ev := range evs {
		byKind[ev.Kind] = append(byKind[ev.Kind], ev.Index)
	}
	for _, k := range []kubejob.Kind{kubejob.KindRunning, kubejob.KindSucceeded} {
		slices.Sort(byKind[k])
		if !slices.Equal(byKind[k], []int{0, 1, 2}) {
			t.Errorf("%s events for indexes %v, want [0 1 2]", k, byKind[k])
		}
	}

	job, err := admin.BatchV1().Jobs(ns).Get(ctx, m.JobName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 3 || *s.Parallelism != 3 ||
		*s.PodReplacementPolicy != batchv1.Failed || *s.BackoffLimitPerIndex != kubejob.DefaultBackoffLimitPerIndex {
		t.Errorf("job spec: mode %s, completions %d, parallelism %d, replacement %s, backoff per index %d",
			*s.CompletionMode, *s.Completions, *s.Parallelism, *s.PodReplacementPolicy, *s.BackoffLimitPerIndex)
	}
	if job.Status.CompletedIndexes != "0-2" {
		t.Errorf("completed indexes %q, want 0-2", job.Status.CompletedIndexes)
	}
	pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelAgents + "=" + m.JobName()})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "" {
			t.Errorf("pod %s has no completion index", p.Name)
		}
		var names []string
		for _, e := range p.Spec.Containers[0].Env {
			names = append(names, e.Name)
		}
		if n := slices.Index(names, kubejob.EnvIndex); n < 0 || slices.Contains(names[n+1:], kubejob.EnvIndex) {
			t.Errorf("pod %s env %v: want %s exactly once", p.Name, names, kubejob.EnvIndex)
		}
		if sc := p.Spec.SecurityContext.Sysctls; len(sc) != 1 || sc[0].Value != kubejob.DefaultPortRange {
			t.Errorf("pod %s sysctls %v", p.Name, sc)
		}
		if a := strings.Join(p.Spec.Containers[0].Args, " "); !strings.Contains(a, "--index $(JOB_COMPLETION_INDEX)") || !strings.Contains(a, "--capacity 10") {
			t.Errorf("pod %s args %q", p.Name, a)
		}
		if !slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/docs" && m.ReadOnly }) {
			t.Errorf("pod %s mounts %+v: no read-only /docs", p.Name, p.Spec.Containers[0].VolumeMounts)
		}
	}
	if len(pods.Items) != 3 || len(nodes) != 3 {
		t.Errorf("%d pods on nodes %v, want 3 pods on 3 nodes (spread, DoNotSchedule)", len(pods.Items), nodes)
	}

	if err := m.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	gone(t, ctx, admin, ns, m.JobName())
	if err := m.Delete(ctx); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

// TestAgentPodFailures: a failed or OOM-killed agent pod is an agent-loss
// event within seconds, and a Job out of retries is a fatal error.
func TestAgentPodFailures(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)

	tests := []struct {
		name    string
		mark    func(*metav1.ObjectMeta)
		backoff int32
		want    kubejob.Kind
		losses  int    // loss events before the Job fails
		reason  string // of the JobFailed event
	}{
		{"oom", kubetest.OOMKill, 1, kubejob.KindOOMKilled, 2, "FailedIndexes"},
		{"error", func(m *metav1.ObjectMeta) { kubetest.Fail(m, "Error", 3) }, 0, kubejob.KindFailed, 1, "FailedIndexes"},
		// Exit code 2 is a usage error: the pod failure policy fails the
		// Job at once, whatever retries are left.
		{"usage", func(m *metav1.ObjectMeta) { kubetest.Fail(m, "Error", 2) }, 5, kubejob.KindFailed, 1, "PodFailurePolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			cfg := config(ns, 1)
			cfg.Name = "agents-" + tt.name
			cfg.BackoffLimitPerIndex = new(tt.backoff)
			mark(&cfg, tt.mark)
			m := newManager(t, cs, cfg)
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			var running time.Time
			var losses []kubejob.Event
			until(t, ctx, m, func(ev kubejob.Event) bool {
				switch {
				case ev.Kind == kubejob.KindRunning:
					running = time.Now()
				case ev.Kind.Lost():
					// kwok fails the pod 1s after it runs.
					if d := time.Since(running); d > 5*time.Second {
						t.Errorf("%s reported %v after Running, want within 5s", ev.Kind, d)
					}
					losses = append(losses, ev)
				}
				return ev.Fatal
			})
			if len(losses) != tt.losses {
				t.Errorf("%d loss events %v, want %d", len(losses), losses, tt.losses)
			}
			for _, ev := range losses {
				if ev.Kind != tt.want || ev.Index != 0 {
					t.Errorf("loss event %+v, want %s of index 0", ev, tt.want)
				}
			}
			var jerr *kubejob.Error
			if err := m.Wait(ctx); !errors.As(err, &jerr) || jerr.Kind != kubejob.KindJobFailed || jerr.Reason != tt.reason {
				t.Fatalf("Wait() = %v, want a JobFailed *Error with reason %s", err, tt.reason)
			}
			if err := m.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			gone(t, ctx, cs, ns, m.JobName())
		})
	}
}

// TestAgentsUnschedulable: a node selector no node matches is reported as
// Unschedulable at once and fails the run after the pending timeout.
func TestAgentsUnschedulable(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	cfg := config(ns, 2)
	cfg.NodeSelector = map[string]string{kubetest.FakeNodeLabel: "no-such-node"}
	cfg.PendingTimeout = 3 * time.Second
	m := newManager(t, cs, cfg)
	start := time.Now()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	evs := until(t, ctx, m, func(ev kubejob.Event) bool { return ev.Fatal })
	if evs[0].Kind != kubejob.KindUnschedulable || !strings.Contains(evs[0].Message, "node affinity/selector") {
		t.Errorf("first event %+v, want Unschedulable naming the node selector", evs[0])
	}
	err := m.Wait(ctx)
	took := time.Since(start)
	var jerr *kubejob.Error
	if !errors.As(err, &jerr) || jerr.Kind != kubejob.KindPendingTooLong || jerr.Reason != corev1.PodReasonUnschedulable {
		t.Fatalf("Wait() = %v, want a PendingTooLong *Error with reason Unschedulable", err)
	}
	if took < cfg.PendingTimeout || took > cfg.PendingTimeout+4*time.Second {
		t.Errorf("fatal after %v, want between %v and %v", took, cfg.PendingTimeout, cfg.PendingTimeout+4*time.Second)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if err := m.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, ctx, cs, ns, m.JobName())
}

// TestAgentsCleanupOnCancel: when Start's context ends (the coordinator
// got a signal), the Manager deletes the Job and its pods by itself.
func TestAgentsCleanupOnCancel(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	cfg := config(ns, 2)
	mark(&cfg, func(m *metav1.ObjectMeta) { kubetest.RunFor(m, time.Minute) })
	m := newManager(t, cs, cfg)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := m.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	n := 0
	until(t, ctx, m, func(ev kubejob.Event) bool {
		if ev.Kind == kubejob.KindRunning {
			n++
		}
		return n == 2
	})
	stop()
	for ev := range m.Events() { // closed once the Job is deleted
		if ev.Kind.Lost() || ev.Fatal {
			t.Errorf("event %s during our own cleanup", ev)
		}
	}
	gone(t, ctx, cs, ns, m.JobName())
	if err := m.Err(); err != nil {
		t.Errorf("Err() = %v after cleanup, want nil", err)
	}
}

// TestAgentsOwnedByCoordinator: with an Owner, the garbage collector
// deletes the Job and its pods when the coordinator's pod is deleted, and
// the Manager reports the Job's disappearance as fatal.
func TestAgentsOwnedByCoordinator(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	owner, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "coordinator"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coordinator", Image: "fleetbench.invalid/fleetbench:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(ns, 2)
	cfg.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}
	mark(&cfg, func(m *metav1.ObjectMeta) { kubetest.RunFor(m, time.Minute) })
	m := newManager(t, cs, cfg)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, m, func(ev kubejob.Event) bool { return ev.Kind == kubejob.KindRunning })
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, m.JobName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(job.OwnerReferences) != 1 || job.OwnerReferences[0].UID != owner.UID {
		t.Fatalf("job owner references %+v, want the coordinator pod", job.OwnerReferences)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, ctx, cs, ns, m.JobName())
	var jerr *kubejob.Error
	if err := m.Wait(ctx); !errors.As(err, &jerr) || jerr.Kind != kubejob.KindDeleted || jerr.Index != -1 {
		t.Errorf("Wait() = %v, want a Deleted *Error for the job", err)
	}
}

// TestAgentsNoPods: when the Job controller cannot create any pod (here a
// quota of zero pods), the run fails after the pending timeout instead of
// waiting for agents that never come.
func TestAgentsNoPods(t *testing.T) {
	t.Parallel()
	restCfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotaEnforced(t, ctx, cs, ns)
	cfg := config(ns, 2)
	cfg.PendingTimeout = 3 * time.Second
	m := newManager(t, cs, cfg)
	start := time.Now()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err := m.Wait(ctx)
	took := time.Since(start)
	var jerr *kubejob.Error
	if !errors.As(err, &jerr) || jerr.Kind != kubejob.KindPendingTooLong || jerr.Index != -1 {
		t.Fatalf("Wait() = %v, want a job-level PendingTooLong *Error", err)
	}
	if took > cfg.PendingTimeout+4*time.Second {
		t.Errorf("fatal after %v, want within %v", took, cfg.PendingTimeout+4*time.Second)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if err := m.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, ctx, cs, ns, m.JobName())
}

// TestAgentsRoleLacksAVerb runs the Manager as a ServiceAccount whose Role
// can create Jobs but not list pods (an overlay that trimmed the base's
// Role): Start must fail at once, name the verb that is missing and where
// the right Role is, and take the Job it created back.
func TestAgentsRoleLacksAVerb(t *testing.T) {
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	ctx := t.Context()
	admin := kubetest.Client(t, cfg)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trimmed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "trimmed"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "trimmed"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "trimmed"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "trimmed"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saCfg, err := kubetest.ImpersonateServiceAccount(ctx, cfg, ns, "trimmed")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubetest.Client(t, saCfg)
	// The binding applies within moments: wait until the Role's verbs work.
	if err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("wait for the role to apply: %v", err)
	}
	m := newManager(t, cs, config(ns, 1))
	err = m.Start(ctx)
	if err == nil {
		t.Fatal("Start succeeded without list on pods")
	}
	for _, want := range []string{"list agent pods", "forbidden", "deploy/base/rbac.yaml", "pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	gone(t, ctx, admin, ns, m.JobName())
}

// quotaEnforced waits until the API server refuses a pod in ns. The quota
// admission plugin reads quotas from a cache (and remembers an empty
// namespace for a while), so a pod created right after the quota may still
// be admitted; the Job's pods would then run and the test would wait for a
// failure that never comes.
func quotaEnforced(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-probe-"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "fleetbench.invalid/probe"}}},
	}
	err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{})
		switch {
		case apierrors.IsForbidden(err):
			return true, nil
		case err != nil:
			return false, err
		}
		t.Logf("quota not enforced yet: probe pod %s admitted", p.Name)
		zero := int64(0)
		return false, cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if err != nil {
		t.Fatalf("wait for the pod quota to be enforced: %v", err)
	}
}
