package kubejob

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Kind says what happened to an agent pod (or, with Index -1, the Job).
type Kind string

// Kinds of Event.
const (
	// KindRunning: the pod runs; its agent should join soon.
	KindRunning Kind = "Running"
	// KindSucceeded: the agent exited 0.
	KindSucceeded Kind = "Succeeded"
	// KindFailed: the pod failed (non-zero exit, eviction, ...): its agent
	// is lost. The Job replaces it while the index has retries left.
	KindFailed Kind = "Failed"
	// KindOOMKilled: the agent ran out of memory: its agent is lost.
	KindOOMKilled Kind = "OOMKilled"
	// KindErrImagePull: pulling the image failed. Fatal unless the reason
	// is a plain ErrImagePull, which the kubelet retries (and turns into
	// ImagePullBackOff when it keeps failing).
	KindErrImagePull Kind = "ErrImagePull"
	// KindImagePullBackOff: the image failed to pull repeatedly. Fatal.
	KindImagePullBackOff Kind = "ImagePullBackOff"
	// KindConfigError: the container cannot be created, mostly a missing
	// Secret or key (CreateContainerConfigError). Fatal.
	KindConfigError Kind = "ConfigError"
	// KindUnschedulable: the scheduler cannot place the pod yet. Not fatal
	// by itself (an autoscaler may add a node); see KindPendingTooLong.
	KindUnschedulable Kind = "Unschedulable"
	// KindPendingTooLong: the pod (or the whole Job, with Index -1 and no
	// pod at all) stayed Pending longer than Config.PendingTimeout. Fatal.
	KindPendingTooLong Kind = "PendingTooLong"
	// KindDeleted: the pod was deleted (or evicted, preempted) before it
	// finished: its agent is lost. With Index -1: the Job was deleted by
	// someone else. Fatal for the Job.
	KindDeleted Kind = "Deleted"
	// KindJobFailed: the Job failed (an index ran out of retries, or an
	// agent exited with a usage error). Fatal; Index is -1.
	KindJobFailed Kind = "JobFailed"
	// KindJobComplete: every agent succeeded; Index is -1.
	KindJobComplete Kind = "JobComplete"
)

// Lost reports whether the kind means the pod's agent is gone for good.
func (k Kind) Lost() bool {
	switch k {
	case KindFailed, KindOOMKilled, KindDeleted:
		return true
	}
	return false
}

// Event is one change of an agent pod or of the Job.
type Event struct {
	// Job is the Job's name.
	Job string
	// Index is the pod's completion index, -1 for the Job itself.
	Index int
	// Pod is the pod's name, empty for the Job.
	Pod  string
	Kind Kind
	// Reason and Message are Kubernetes' words: the container's
	// terminated or waiting reason and message, the pod condition's, or
	// the Job condition's.
	Reason, Message string
	// Fatal is set when the run cannot go on: the Manager's Err returns
	// the same condition as an *Error.
	Fatal bool
}

// String formats the event for logs.
func (e Event) String() string {
	var b strings.Builder
	if e.Pod != "" {
		fmt.Fprintf(&b, "agent pod %s (index %d): ", e.Pod, e.Index)
	} else {
		b.WriteString("agent job: ")
	}
	b.WriteString(describe[e.Kind])
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Error is a fatal condition of the agents: the run cannot go on. Check
// for it with errors.As and look at Kind.
type Error struct {
	Event
}

func (e *Error) Error() string {
	return fmt.Sprintf("run agents (job %s): %s", e.Job, e.String())
}

var describe = map[Kind]string{
	KindRunning:          "running",
	KindSucceeded:        "succeeded",
	KindFailed:           "failed",
	KindOOMKilled:        "killed for running out of memory (raise --agent-memory)",
	KindErrImagePull:     "image pull failed",
	KindImagePullBackOff: "image pull keeps failing (check the image name and pull secrets)",
	KindConfigError:      "container cannot be created (check the Secrets it reads)",
	KindUnschedulable:    "unschedulable",
	KindPendingTooLong:   "pending too long",
	KindDeleted:          "deleted before it finished",
	KindJobFailed:        "failed",
	KindJobComplete:      "complete",
}

// classify reads what a pod's status says, from its container statuses
// and conditions. It returns "" for a pod that is plainly pending
// (created, being scheduled, or pulling its image).
func classify(p *corev1.Pod) (kind Kind, reason, message string, fatal bool) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return KindSucceeded, "", "", false
	case corev1.PodFailed:
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if t == nil {
				continue
			}
			msg := "exit code " + strconv.Itoa(int(t.ExitCode))
			if t.Reason == "OOMKilled" {
				// The kernel killed it: any message is the kubelet's
				// fallback to the log's tail, which says nothing of why.
				return KindOOMKilled, t.Reason, msg, false
			}
			if t.Message != "" {
				msg += ": " + strings.TrimSpace(t.Message)
			}
			if t.ExitCode != 0 {
				return KindFailed, t.Reason, msg, false
			}
		}
		// Evicted, node lost, deadline exceeded: the pod's own words.
		return KindFailed, p.Status.Reason, p.Status.Message, false
	}
	if p.DeletionTimestamp != nil {
		reason := "Deleted"
		var msg string
		if c := condition(p, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
			reason, msg = c.Reason, c.Message
		}
		return KindDeleted, reason, msg, false
	}
	if p.Status.Phase == corev1.PodRunning {
		return KindRunning, "", "", false
	}
	for _, cs := range p.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ImagePullBackOff":
			return KindImagePullBackOff, w.Reason, w.Message, true
		case "ErrImagePull":
			return KindErrImagePull, w.Reason, w.Message, false
		case "InvalidImageName", "ErrImageNeverPull":
			return KindErrImagePull, w.Reason, w.Message, true
		case "CreateContainerConfigError", "CreateContainerError":
			return KindConfigError, w.Reason, w.Message, true
		}
	}
	if c := condition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse &&
		c.Reason == corev1.PodReasonUnschedulable {
		return KindUnschedulable, c.Reason, c.Message, false
	}
	return "", "", "", false
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podIndex returns the pod's completion index, or -1.
func podIndex(p *corev1.Pod) int {
	s, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		s, ok = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

// jobState returns the Job's terminal condition, if any.
func jobState(j *batchv1.Job) (kind Kind, reason, message string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		// FailureTarget comes first, while the last pods terminate.
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return KindJobFailed, c.Reason, c.Message
		case batchv1.JobComplete:
			return KindJobComplete, c.Reason, c.Message
		}
	}
	return "", "", ""
}
