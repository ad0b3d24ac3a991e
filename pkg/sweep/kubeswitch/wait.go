package kubeswitch

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` sets; changing it makes the Deployment controller roll every pod.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// ErrRolloutFailed means a Deployment reported ProgressDeadlineExceeded
// while a switch waited for it.
var ErrRolloutFailed = errors.New("rollout failed")

// poll calls cond every interval until it is done, fails, or ctx ends. cond
// returns why it is not done yet; a timeout error ends with the last why,
// so it says what was awaited. cond's error ends the wait at once: it
// returns one only for what waiting cannot fix (forbidden, not found).
func poll(ctx context.Context, interval time.Duration, what string, cond func(context.Context) (done bool, why string, err error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var why string
	for {
		done, w, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if done {
			return nil
		}
		// A request cut off by the deadline says less than the answer
		// before it.
		if ctx.Err() == nil || why == "" {
			why = w
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s (%s): %w", what, why, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// transient sorts an API error met while waiting: nil when it is worth
// trying again (the apiserver restarting, a timeout), else the error.
func transient(err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err):
		return err
	}
	return nil
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podSet is what a switch expects of the pods one selector picks.
type podSet struct {
	// name says which pods these are in messages ("Frontend pods").
	name     string
	selector string
	// want is the number of pods that must be up.
	want int
	// old are pods deleted by the switch: none of them may be counted.
	old map[types.UID]bool
	// check, when set, is asked of every pod: "" when the pod is as
	// wanted, else why not.
	check func(*corev1.Pod) string
}

// ready reports whether at least want pods, none of them old and none
// terminating, are Ready and pass check, and no other pod (say, an old
// ReplicaSet's) is still up.
func (s podSet) ready(ctx context.Context, cs kubernetes.Interface, ns string) (bool, string, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.selector})
	if err != nil {
		if err := transient(err); err != nil {
			return false, "", fmt.Errorf("list %s: %w", s.name, err)
		}
		return false, fmt.Sprintf("list %s: %v", s.name, err), nil
	}
	up := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if s.old[p.UID] {
			return false, fmt.Sprintf("%s: pod %s not yet replaced", s.name, p.Name), nil
		}
		if s.check != nil {
			if why := s.check(p); why != "" {
				return false, fmt.Sprintf("%s: pod %s: %s", s.name, p.Name, why), nil
			}
		}
		if !podReady(p) {
			return false, fmt.Sprintf("%s: pod %s not ready", s.name, p.Name), nil
		}
		up++
	}
	if up < s.want {
		return false, fmt.Sprintf("%s: %d of %d ready", s.name, up, s.want), nil
	}
	return true, "", nil
}

// deletePods deletes the pods selector picks and returns their UIDs, so a
// wait can tell their replacements from them.
func deletePods(ctx context.Context, cs kubernetes.Interface, ns, selector string) (map[types.UID]bool, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list pods %s: %w", selector, err)
	}
	old := make(map[types.UID]bool, len(list.Items))
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		uid := p.UID
		err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
		old[uid] = true
	}
	return old, nil
}

// restartDeployment does what `kubectl rollout restart` does: it sets the
// restartedAt annotation of the pod template, so every pod is replaced.
func restartDeployment(ctx context.Context, cs kubernetes.Interface, ns, name string, now time.Time) error {
	// kubectl writes RFC 3339 to the second; nanoseconds keep two
	// restarts within one second from being the same no-op patch.
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		RestartedAtAnnotation, now.Format(time.RFC3339Nano))
	_, err := cs.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("restart deployment %s: %w", name, err)
	}
	return nil
}

// rolledOut is `kubectl rollout status` for one Deployment: the controller
// saw the latest spec, every replica runs the latest template, no old
// replica is left and all are available.
func rolledOut(ctx context.Context, cs kubernetes.Interface, ns, name string) (bool, string, error) {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if err := transient(err); err != nil {
			return false, "", fmt.Errorf("get deployment %s: %w", name, err)
		}
		return false, fmt.Sprintf("get deployment %s: %v", name, err), nil
	}
	return deploymentDone(d)
}

func deploymentDone(d *appsv1.Deployment) (bool, string, error) {
	if d.Status.ObservedGeneration < d.Generation {
		return false, fmt.Sprintf("deployment %s: generation %d not yet observed", d.Name, d.Generation), nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, "", fmt.Errorf("%w: deployment %s: %s", ErrRolloutFailed, d.Name, c.Message)
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("deployment %s: %d of %d replicas updated", d.Name, st.UpdatedReplicas, want), nil
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("deployment %s: %d old replicas pending termination", d.Name, st.Replicas-st.UpdatedReplicas), nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("deployment %s: %d of %d updated replicas available", d.Name, st.AvailableReplicas, st.UpdatedReplicas), nil
	}
	return true, "", nil
}
