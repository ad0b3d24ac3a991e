package kubetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PollInterval is how often the wait helpers look again. The control plane
// is local and kwok acts within milliseconds, so a short interval keeps
// tests fast at little cost.
const PollInterval = 100 * time.Millisecond

// ErrJobFailed is returned by WaitJob when the Job ends with the Failed
// condition instead of Complete.
var ErrJobFailed = errors.New("job failed")

// Poll calls cond every PollInterval until it returns true or an error, or
// ctx ends. On timeout the error wraps ctx.Err() and the last error cond
// returned alongside false, if any, so the failure says what was awaited.
func Poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("poll: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitJob waits until the Job has the Complete or the Failed condition and
// returns it; with Failed the error wraps ErrJobFailed.
func WaitJob(ctx context.Context, cs kubernetes.Interface, ns, name string) (*batchv1.Job, error) {
	var job *batchv1.Job
	err := Poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		job, err = cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get job %s/%s: %w", ns, name, err)
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				return false, fmt.Errorf("%w: %s/%s: %s: %s", ErrJobFailed, ns, name, c.Reason, c.Message)
			}
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, ErrJobFailed) {
		return job, fmt.Errorf("wait for job %s/%s to finish: %w (status: %+v)", ns, name, err, statusOf(job))
	}
	return job, err
}

func statusOf(job *batchv1.Job) any {
	if job == nil {
		return nil
	}
	return job.Status
}

// WaitPodPhase waits until the pod is in one of phases and returns it.
func WaitPodPhase(ctx context.Context, cs kubernetes.Interface, ns, name string, phases ...corev1.PodPhase) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := Poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
		}
		return slices.Contains(phases, pod.Status.Phase), nil
	})
	if err != nil {
		phase := corev1.PodPhase("unknown")
		if pod != nil {
			phase = pod.Status.Phase
		}
		return pod, fmt.Errorf("wait for pod %s/%s to be %v (is %s): %w", ns, name, phases, phase, err)
	}
	return pod, nil
}
