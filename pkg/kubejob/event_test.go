package kubejob

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod makes an agent pod of index i with the given status.
func pod(uid string, i string, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "agents-" + i + "-" + uid, UID: types.UID(uid), Namespace: "bench",
			Labels:      map[string]string{LabelAgents: "agents"},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: i},
		},
		Status: status,
	}
}

func waiting(reason, msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
	}}}
}

func terminated(reason string, code int32) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}},
	}}}
}

var unschedulable = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
	Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
}}}

func TestClassify(t *testing.T) {
	deleted := pod("d", "1", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler",
	}}})
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		kind   Kind
		reason string
		fatal  bool
	}{
		{"pending", pod("a", "0", corev1.PodStatus{Phase: corev1.PodPending}), "", "", false},
		{"running", pod("a", "0", corev1.PodStatus{Phase: corev1.PodRunning}), KindRunning, "", false},
		{"succeeded", pod("a", "0", corev1.PodStatus{Phase: corev1.PodSucceeded}), KindSucceeded, "", false},
		{"oom", pod("a", "0", terminated("OOMKilled", 137)), KindOOMKilled, "OOMKilled", false},
		{"error", pod("a", "0", terminated("Error", 1)), KindFailed, "Error", false},
		{"evicted", pod("a", "0", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}), KindFailed, "Evicted", false},
		{"err image pull", pod("a", "0", waiting("ErrImagePull", "not found")), KindErrImagePull, "ErrImagePull", false},
		{"image pull backoff", pod("a", "0", waiting("ImagePullBackOff", "Back-off pulling image")), KindImagePullBackOff, "ImagePullBackOff", true},
		{"invalid image", pod("a", "0", waiting("InvalidImageName", "bad")), KindErrImagePull, "InvalidImageName", true},
		{"missing secret", pod("a", "0", waiting("CreateContainerConfigError", `secret "tok" not found`)), KindConfigError, "CreateContainerConfigError", true},
		{"container creating", pod("a", "0", waiting("ContainerCreating", "")), "", "", false},
		{"unschedulable", pod("a", "0", unschedulable), KindUnschedulable, corev1.PodReasonUnschedulable, false},
		{"preempted", deleted, KindDeleted, "PreemptionByScheduler", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, reason, _, fatal := classify(tt.pod)
			if kind != tt.kind || reason != tt.reason || fatal != tt.fatal {
				t.Errorf("classify = %q, %q, fatal %t; want %q, %q, fatal %t", kind, reason, fatal, tt.kind, tt.reason, tt.fatal)
			}
		})
	}
}

func TestTrackerPodLifecycle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker("agents", 10*time.Second, t0)
	var got []Kind
	feed := func(evs []Event) {
		for _, e := range evs {
			got = append(got, e.Kind)
		}
	}
	feed(tr.pod(pod("a", "0", corev1.PodStatus{Phase: corev1.PodPending}), t0))
	feed(tr.pod(pod("a", "0", corev1.PodStatus{Phase: corev1.PodRunning}), t0.Add(time.Second)))
	feed(tr.pod(pod("a", "0", corev1.PodStatus{Phase: corev1.PodRunning}), t0.Add(2*time.Second))) // resync: no repeat
	feed(tr.check(t0.Add(time.Minute)))                                                            // running: never pending too long
	feed(tr.pod(pod("a", "0", terminated("OOMKilled", 137)), t0.Add(3*time.Second)))
	feed(tr.podGone(pod("a", "0", terminated("OOMKilled", 137)))) // already terminal: no Deleted
	feed(tr.pod(pod("b", "0", corev1.PodStatus{Phase: corev1.PodRunning}), t0.Add(4*time.Second)))
	feed(tr.podGone(pod("b", "0", corev1.PodStatus{Phase: corev1.PodRunning}))) // vanished while running
	want := []Kind{KindRunning, KindOOMKilled, KindRunning, KindDeleted}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if tr.err != nil {
		t.Errorf("fatal error %v after agent losses only", tr.err)
	}
}

func TestTrackerPendingTooLong(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker("agents", 10*time.Second, t0)
	evs := tr.pod(pod("a", "2", unschedulable), t0)
	if len(evs) != 1 || evs[0].Kind != KindUnschedulable || evs[0].Fatal || evs[0].Index != 2 {
		t.Fatalf("events %+v, want one non-fatal Unschedulable of index 2", evs)
	}
	if evs := tr.check(t0.Add(9 * time.Second)); len(evs) != 0 {
		t.Fatalf("events %+v before the timeout", evs)
	}
	evs = tr.check(t0.Add(10 * time.Second))
	if len(evs) != 1 || evs[0].Kind != KindPendingTooLong || !evs[0].Fatal || evs[0].Reason != corev1.PodReasonUnschedulable {
		t.Fatalf("events %+v, want one fatal PendingTooLong with reason Unschedulable", evs)
	}
	if tr.err == nil || tr.err.Kind != KindPendingTooLong {
		t.Errorf("err = %v, want PendingTooLong", tr.err)
	}
	if evs := tr.check(t0.Add(20 * time.Second)); len(evs) != 0 {
		t.Errorf("reported again: %+v", evs)
	}
}

func TestTrackerNoPods(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker("agents", 5*time.Second, t0)
	evs := tr.check(t0.Add(5 * time.Second))
	if len(evs) != 1 || evs[0].Index != -1 || evs[0].Kind != KindPendingTooLong || !evs[0].Fatal {
		t.Fatalf("events %+v, want one fatal job-level PendingTooLong", evs)
	}
}

func TestTrackerDeleting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker("agents", 5*time.Second, t0)
	tr.pod(pod("a", "0", corev1.PodStatus{Phase: corev1.PodRunning}), t0)
	tr.deleting = true
	p := pod("a", "0", corev1.PodStatus{Phase: corev1.PodRunning})
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	evs := append(tr.pod(p, t0), tr.podGone(p)...)
	evs = append(evs, tr.jobGone()...)
	if len(evs) != 0 || tr.err != nil {
		t.Errorf("events %+v, err %v while deleting; want none", evs, tr.err)
	}
}

func TestTrackerJob(t *testing.T) {
	job := func(ct batchv1.JobConditionType) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: ct, Status: corev1.ConditionTrue, Reason: "R"}}}}
	}
	tr := newTracker("agents", time.Second, time.Unix(0, 0))
	if evs := tr.jobUpdate(job(batchv1.JobComplete)); len(evs) != 1 || evs[0].Kind != KindJobComplete || !tr.complete || tr.err != nil {
		t.Errorf("complete: events %+v, complete %t, err %v", evs, tr.complete, tr.err)
	}
	if evs := tr.jobGone(); len(evs) != 0 {
		t.Errorf("deleting a complete job: events %+v", evs)
	}
	tr = newTracker("agents", time.Second, time.Unix(0, 0))
	if evs := tr.jobUpdate(job(batchv1.JobFailureTarget)); len(evs) != 1 || !evs[0].Fatal || tr.err == nil || tr.err.Kind != KindJobFailed {
		t.Errorf("failed: events %+v, err %v", evs, tr.err)
	}
	if evs := tr.jobUpdate(job(batchv1.JobFailed)); len(evs) != 0 {
		t.Errorf("failed twice: events %+v", evs)
	}
	tr = newTracker("agents", time.Second, time.Unix(0, 0))
	if evs := tr.jobGone(); len(evs) != 1 || !evs[0].Fatal || evs[0].Kind != KindDeleted {
		t.Errorf("deleted by someone else: events %+v", evs)
	}
}

// TestJobFailureNamesTheAgentFailure: the Job's own failure ("Job has
// failed indexes") is reported with the last agent pod's failure, so the
// one error line a user sees says why (here: out of memory).
func TestJobFailureNamesTheAgentFailure(t *testing.T) {
	tr := newTracker("agents", time.Second, time.Unix(0, 0))
	oom := terminated("OOMKilled", 137)
	oom.ContainerStatuses[0].State.Terminated.Message = `{"@message":"connected to coordinator"}`
	evs := tr.pod(pod("a", "0", oom), time.Unix(1, 0))
	if len(evs) != 1 || evs[0].Kind != KindOOMKilled || evs[0].Message != "exit code 137" {
		t.Fatalf("OOM-killed pod: events %+v; want one OOMKilled event without the log tail", evs)
	}
	failed := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "FailedIndexes", Message: "Job has failed indexes"}}}}
	tr.jobUpdate(failed)
	if tr.err == nil {
		t.Fatal("a failed Job is not fatal")
	}
	msg := tr.err.Error()
	for _, want := range []string{"Job has failed indexes", "killed for running out of memory", "raise --agent-memory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
