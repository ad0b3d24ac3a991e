//go:build e2e

package kubetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
)

// container is a container for the fake nodes: kwok never pulls or runs the
// image, so any name will do.
var container = corev1.Container{Name: "agent", Image: "fleetbench.invalid/agent:test"}

// TestIndexedJobCompletes proves the whole chain: the Job controller creates
// indexed pods, the scheduler binds them to kwok nodes, kwok runs and
// completes them, and the Job controller marks the Job Complete.
func TestIndexedJobCompletes(t *testing.T) {
	t.Parallel()
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	cs := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	mode := batchv1.IndexedCompletion
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "agents"},
		Spec: batchv1.JobSpec{
			Completions:    new(int32(2)),
			Parallelism:    new(int32(2)),
			CompletionMode: &mode,
			BackoffLimit:   new(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{container},
			}},
		},
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	done, err := kubetest.WaitJob(ctx, cs, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status.Succeeded != 2 || done.Status.CompletedIndexes != "0,1" {
		t.Errorf("job status: succeeded %d, completed indexes %q; want 2, \"0,1\"",
			done.Status.Succeeded, done.Status.CompletedIndexes)
	}

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var indexes []string
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s: node %q, phase %s; want a kwok node, Succeeded", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		indexes = append(indexes, p.Annotations[batchv1.JobCompletionIndexAnnotation])
	}
	slices.Sort(indexes)
	if !slices.Equal(indexes, []string{"0", "1"}) {
		t.Errorf("pod completion indexes %v, want [0 1]", indexes)
	}
}

// TestRunFor proves that RunFor holds a Job's pod Running for the given time
// and that a pod no Job owns keeps running.
func TestRunFor(t *testing.T) {
	t.Parallel()
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	cs := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const hold = 3 * time.Second
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{container},
			}},
		},
	}
	kubetest.RunFor(&job.Spec.Template.ObjectMeta, hold)
	server := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	done, err := kubetest.WaitJob(ctx, cs, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Both times have whole seconds; a run of at least hold still spans
	// at least hold between them.
	if ran := done.Status.CompletionTime.Sub(done.Status.StartTime.Time); ran < hold {
		t.Errorf("job ran %v, want at least %v", ran, hold)
	}
	got, err := cs.CoreV1().Pods(ns).Get(ctx, server.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("pod %s is %s, want Running", got.Name, got.Status.Phase)
	}
}

// TestPodFailure proves the failure stages: a pod marked with OOMKill or
// Fail ends Failed with the container status a kubelet would report, and a
// Job with such a pod and no retries fails.
func TestPodFailure(t *testing.T) {
	t.Parallel()
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	cs := kubetest.Client(t, cfg)

	tests := []struct {
		name     string
		mark     func(*metav1.ObjectMeta)
		reason   string
		exitCode int32
	}{
		{"oom", kubetest.OOMKill, "OOMKilled", 137},
		{"error", func(m *metav1.ObjectMeta) { kubetest.Fail(m, "Error", 3) }, "Error", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{container},
				},
			}
			tt.mark(&pod.ObjectMeta)
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod: %v", err)
			}
			got, err := kubetest.WaitPodPhase(ctx, cs, ns, pod.Name, corev1.PodFailed, corev1.PodSucceeded)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != corev1.PodFailed || len(got.Status.ContainerStatuses) != 1 {
				t.Fatalf("pod phase %s with %d container statuses, want Failed with 1",
					got.Status.Phase, len(got.Status.ContainerStatuses))
			}
			term := got.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.Reason != tt.reason || term.ExitCode != tt.exitCode {
				t.Errorf("container terminated state %+v, want reason %s, exit code %d", term, tt.reason, tt.exitCode)
			}
		})
	}

	t.Run("job", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "oom"},
			Spec: batchv1.JobSpec{
				BackoffLimit: new(int32(0)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{container},
				}},
			},
		}
		kubetest.OOMKill(&job.Spec.Template.ObjectMeta)
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create job: %v", err)
		}
		got, err := kubetest.WaitJob(ctx, cs, ns, job.Name)
		if !errors.Is(err, kubetest.ErrJobFailed) {
			t.Fatalf("wait for job: %v, want ErrJobFailed", err)
		}
		if got.Status.Failed != 1 {
			t.Errorf("job status failed = %d, want 1", got.Status.Failed)
		}
	})
}

// TestImpersonateServiceAccount proves that RBAC is enforced for a
// ServiceAccount's token: forbidden before a RoleBinding, allowed after.
func TestImpersonateServiceAccount(t *testing.T) {
	t.Parallel()
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	admin := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coordinator"}}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create serviceaccount: %v", err)
	}
	saCfg, err := kubetest.ImpersonateServiceAccount(ctx, cfg, ns, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list jobs without a role: %v, want Forbidden", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list"},
		}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rolebinding: %v", err)
	}
	// The authorizer's RBAC cache follows the binding within milliseconds.
	err = kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("list jobs with a role: %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list pods, which the role does not grant: %v, want Forbidden", err)
	}
}
