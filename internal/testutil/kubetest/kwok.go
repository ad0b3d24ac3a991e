package kubetest

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys understood by the kwok stages in scripts/kube-env/kwok/stages.yaml,
// which drive the pods on the fake nodes: a pod becomes Running at once; a
// Job's pod then succeeds after CompleteDelay (1s by default); a pod with
// the FailLabel fails instead.
const (
	// FailLabel, set to "true" on a pod, makes it fail one second after it
	// runs, with the reason, message and exit code of the annotations below.
	FailLabel = "pod-container-running-failed.stage.kwok.x-k8s.io"
	// FailReasonAnnotation is the terminated container's reason
	// (default "containerFailed").
	FailReasonAnnotation = FailLabel + "/reason"
	// FailMessageAnnotation is the terminated container's message.
	FailMessageAnnotation = FailLabel + "/message"
	// FailExitCodeAnnotation is the terminated container's exit code
	// (default 1).
	FailExitCodeAnnotation = FailLabel + "/exit-code"
	// CompleteDelayAnnotation holds how long a Job's pod runs before it
	// succeeds, as a Go duration ("30s").
	CompleteDelayAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"

	// FakeNodeLabel is the label, with value "kwok", on every fake node.
	FakeNodeLabel = "type"
)

// Fail marks a pod (or a pod template) to fail on a fake node with the given
// container termination reason and exit code.
func Fail(m *metav1.ObjectMeta, reason string, exitCode int32) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Labels[FailLabel] = "true"
	m.Annotations[FailReasonAnnotation] = reason
	m.Annotations[FailExitCodeAnnotation] = strconv.Itoa(int(exitCode))
}

// OOMKill marks a pod (or a pod template) to be killed for running out of
// memory: reason OOMKilled, exit code 137, as the kubelet reports it.
func OOMKill(m *metav1.ObjectMeta) { Fail(m, "OOMKilled", 137) }

// RunFor makes a Job's pod (or pod template) run for d before it succeeds.
func RunFor(m *metav1.ObjectMeta, d time.Duration) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[CompleteDelayAnnotation] = d.String()
}
