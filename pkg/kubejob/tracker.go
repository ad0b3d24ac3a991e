package kubejob

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// tracker turns the observed states of the Job and its pods into Events
// and the first fatal condition. It does no I/O and takes the time as a
// parameter; the Manager's loop goroutine owns it.
type tracker struct {
	job     string
	timeout time.Duration
	// deleting is set once the Manager deletes the Job: pods going away
	// are then expected, not agent losses.
	deleting bool

	pods     map[types.UID]*podState
	started  time.Time // when tracking began; bounds the wait for a first pod
	anyPod   bool
	noPods   bool // the no-pod timeout was reported
	jobKind  Kind
	err      *Error
	complete bool
	// lastFailure describes the last agent pod that failed, for the
	// Job's failure.
	lastFailure string
}

type podState struct {
	name  string
	index int
	last  Kind // the last kind reported
	// pendingSince is when the pod was first seen pending; zero once it
	// runs or ends.
	pendingSince    time.Time
	reason, message string // the latest reason it is pending for
	pendingReported bool
}

func newTracker(job string, timeout time.Duration, now time.Time) *tracker {
	return &tracker{job: job, timeout: timeout, pods: map[types.UID]*podState{}, started: now}
}

// emit records ev as the fatal error when it is the first fatal one.
func (t *tracker) emit(out []Event, ev Event) []Event {
	ev.Job = t.job
	if ev.Fatal && t.err == nil {
		t.err = &Error{Event: ev}
	}
	return append(out, ev)
}

// pod observes a pod's new state.
func (t *tracker) pod(p *corev1.Pod, now time.Time) []Event {
	t.anyPod = true
	s := t.pods[p.UID]
	if s == nil {
		s = &podState{name: p.Name, index: podIndex(p)}
		t.pods[p.UID] = s
	}
	kind, reason, message, fatal := classify(p)
	pending := p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil
	switch {
	case pending && s.pendingSince.IsZero():
		s.pendingSince = now
	case !pending:
		s.pendingSince = time.Time{}
	}
	if pending && reason != "" {
		s.reason, s.message = reason, message
	}
	if kind == "" || kind == s.last || (kind == KindDeleted && t.deleting) {
		return nil
	}
	if s.last.terminal() {
		// A terminal pod's later updates (finalizers removed, deletion)
		// say nothing new about its agent.
		return nil
	}
	s.last = kind
	ev := Event{Index: s.index, Pod: s.name, Kind: kind, Reason: reason, Message: message, Fatal: fatal}
	if kind.terminal() && kind != KindSucceeded {
		t.lastFailure = ev.String()
	}
	return t.emit(nil, ev)
}

// podGone observes a pod's removal.
func (t *tracker) podGone(p *corev1.Pod) []Event {
	s := t.pods[p.UID]
	delete(t.pods, p.UID)
	if s == nil {
		s = &podState{name: p.Name, index: podIndex(p)}
	}
	if t.deleting || s.last.terminal() {
		return nil
	}
	return t.emit(nil, Event{Index: s.index, Pod: s.name, Kind: KindDeleted, Reason: "Deleted"})
}

// job observes the Job's new state.
func (t *tracker) jobUpdate(j *batchv1.Job) []Event {
	kind, reason, message := jobState(j)
	if kind == "" || kind == t.jobKind {
		return nil
	}
	t.jobKind = kind
	if kind == KindJobComplete {
		t.complete = true
	}
	if kind == KindJobFailed && t.lastFailure != "" {
		// "Job has failed indexes" says nothing of why: the last agent
		// pod's failure does.
		message += "; last: " + t.lastFailure
	}
	return t.emit(nil, Event{Index: -1, Kind: kind, Reason: reason, Message: message, Fatal: kind == KindJobFailed})
}

// jobGone observes the Job's removal.
func (t *tracker) jobGone() []Event {
	if t.deleting || t.complete || t.jobKind == KindDeleted {
		return nil
	}
	t.jobKind = KindDeleted
	return t.emit(nil, Event{Index: -1, Kind: KindDeleted, Reason: "Deleted",
		Message: "someone else deleted the agents' job", Fatal: true})
}

// check reports pods pending for longer than the timeout, and a Job that
// made no pod at all in that time.
func (t *tracker) check(now time.Time) []Event {
	if t.deleting || t.timeout <= 0 {
		return nil
	}
	var out []Event
	for _, s := range t.pods {
		if s.pendingSince.IsZero() || s.pendingReported || now.Sub(s.pendingSince) < t.timeout {
			continue
		}
		s.pendingReported = true
		reason, msg := s.reason, s.message
		if reason == "" {
			reason, msg = "Pending", "its containers did not start"
		}
		out = t.emit(out, Event{Index: s.index, Pod: s.name, Kind: KindPendingTooLong,
			Reason: reason, Message: msg + " (pending " + t.timeout.String() + ")", Fatal: true})
	}
	if !t.anyPod && !t.noPods && now.Sub(t.started) >= t.timeout {
		t.noPods = true
		out = t.emit(out, Event{Index: -1, Kind: KindPendingTooLong, Reason: "NoPods",
			Message: "the job created no pod in " + t.timeout.String() +
				" (kubectl describe job " + t.job + ": a quota, an admission webhook or Pod Security may refuse them)",
			Fatal: true})
	}
	return out
}

// terminal reports whether a pod in this state will not run again.
func (k Kind) terminal() bool {
	switch k {
	case KindSucceeded, KindFailed, KindOOMKilled, KindDeleted:
		return true
	}
	return false
}
