package kubejob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Defaults of the Manager's options.
const (
	// DefaultCheckInterval is how often pending pods are checked against
	// the pending timeout.
	DefaultCheckInterval = time.Second
	// DefaultResync is the informers' resync period: a missed update is
	// seen again within it.
	DefaultResync = 30 * time.Second
	// DefaultCleanupTimeout bounds the Job's deletion when Start's context
	// ends.
	DefaultCleanupTimeout = 30 * time.Second
	// EventBuffer is the capacity of the Events channel; the Manager keeps
	// any excess queued in order, so a slow reader delays events but never
	// loses them or stalls the watcher.
	EventBuffer = 64
)

// ErrJobExists is returned by Start when a Job of the same name exists
// that this run did not create.
var ErrJobExists = errors.New("a job of that name exists and belongs to another run")

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("agents job manager closed")

// Option sets an optional Manager knob.
type Option func(*Manager)

// WithCheckInterval sets how often pending pods are checked (default
// DefaultCheckInterval).
func WithCheckInterval(d time.Duration) Option { return func(m *Manager) { m.checkEvery = d } }

// WithResync sets the informers' resync period (default DefaultResync).
func WithResync(d time.Duration) Option { return func(m *Manager) { m.resync = d } }

// WithClock sets the clock the pending timeout is measured with (tests).
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// Manager creates the agents' Job, watches its pods and deletes it.
//
// Start creates the Job and a watcher goroutine that reports pod changes
// on Events and remembers the first fatal condition (Err, Wait). When the
// context given to Start ends, the watcher deletes the Job and stops.
// Delete deletes the Job and waits until it is gone; Close stops the
// watcher and closes Events. All methods are safe for concurrent use;
// Close and Delete may be called more than once.
type Manager struct {
	cs     kubernetes.Interface
	cfg    Config
	job    *batchv1.Job
	logger hclog.Logger

	checkEvery time.Duration
	resync     time.Duration
	now        func() time.Time

	events chan Event
	done   chan struct{} // closed once the outcome is known
	stop   chan struct{} // closed by Close
	exited chan struct{} // closed when the watcher has stopped

	deleting atomic.Bool

	mu       sync.Mutex
	started  bool
	closed   bool
	err      error
	finished bool
}

// NewManager validates cfg and returns a Manager for it. A Config without
// a RunID gets a random one, so runs in one namespace never share a Job.
func NewManager(cs kubernetes.Interface, cfg Config, logger hclog.Logger, opts ...Option) (*Manager, error) {
	if cfg.RunID == "" {
		cfg.RunID = utilrand.String(5)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agents job config: %w", err)
	}
	cfg = cfg.withDefaults()
	m := &Manager{
		cs:         cs,
		cfg:        cfg,
		job:        Build(cfg),
		checkEvery: DefaultCheckInterval,
		resync:     DefaultResync,
		now:        time.Now,
		events:     make(chan Event, EventBuffer),
		done:       make(chan struct{}),
		stop:       make(chan struct{}),
		exited:     make(chan struct{}),
	}
	for _, o := range opts {
		o(m)
	}
	m.logger = logger.Named("kubejob").With("namespace", cfg.Namespace, "job", m.job.Name)
	return m, nil
}

// JobName returns the name of the Job.
func (m *Manager) JobName() string { return m.job.Name }

// Agents returns the number of agent pods the Job runs.
func (m *Manager) Agents() int { return int(*m.job.Spec.Completions) }

// Job returns a copy of the Job the Manager creates.
func (m *Manager) Job() *batchv1.Job { return m.job.DeepCopy() }

// Events delivers pod and Job changes in order. It is closed after Close,
// or after the context given to Start ends and the Job is deleted.
func (m *Manager) Events() <-chan Event { return m.events }

// Done is closed once the agents' outcome is known: a fatal condition
// (Err returns it) or the Job completed (Err returns nil).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err returns the first fatal condition, an *Error, or nil.
func (m *Manager) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Wait blocks until every agent has succeeded (nil), a fatal condition
// (an *Error), or ctx ends.
func (m *Manager) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return m.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start creates the Job, or adopts it when this run already created it,
// and starts watching its pods. A second call returns nil. When ctx ends,
// the watcher deletes the Job (bounded by DefaultCleanupTimeout) and
// closes Events.
// rbacHint says how to fix a forbidden request, "" for other errors.
func rbacHint(err error) string {
	if !apierrors.IsForbidden(err) {
		return ""
	}
	return " (the coordinator's ServiceAccount needs the Role of deploy/base/rbac.yaml: create, get, list, watch and delete on batch jobs; get, list, watch and delete on pods)"
}

func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.started {
		return nil
	}
	jobs := m.cs.BatchV1().Jobs(m.cfg.Namespace)
	_, err := jobs.Create(ctx, m.job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, gerr := jobs.Get(ctx, m.job.Name, metav1.GetOptions{})
		switch {
		case gerr != nil:
			err = gerr
		case got.Labels[LabelRun] != m.cfg.RunID:
			return fmt.Errorf("create agents job %s/%s: %w", m.cfg.Namespace, m.job.Name, ErrJobExists)
		default:
			err = nil
			m.logger.Debug("adopted existing agents job")
		}
	}
	if err != nil {
		return fmt.Errorf("create agents job %s/%s: %w%s", m.cfg.Namespace, m.job.Name, err, rbacHint(err))
	}
	// Listing once first turns missing RBAC into a clear error here rather
	// than an informer retrying forever in the background.
	sel := labels.SelectorFromSet(labels.Set{LabelAgents: m.job.Name}).String()
	if _, err := m.cs.CoreV1().Pods(m.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1}); err != nil {
		err = fmt.Errorf("list agent pods: %w%s", err, rbacHint(err))
		// Agents nobody watches must not run: take the Job back.
		if derr := m.Delete(ctx); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	m.logger.Info("agents job created", "agents", m.Agents(), "image", m.cfg.Image, "coordinator", m.cfg.CoordinatorAddr)
	m.started = true
	go m.watch(ctx, sel)
	return nil
}

// watch is the watcher goroutine: it owns the tracker, feeds it from the
// informers and a ticker, and sends Events.
func (m *Manager) watch(ctx context.Context, sel string) {
	defer close(m.exited)
	defer close(m.events)

	infCtx, stopInformers := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(m.cs, m.resync,
		informers.WithNamespace(m.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	updates := make(chan update)
	send := func(u update) {
		select {
		case updates <- u:
		case <-infCtx.Done():
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(update{obj: obj}) },
		UpdateFunc: func(_, obj any) { send(update{obj: obj}) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			send(update{obj: obj, gone: true})
		},
	}
	for _, inf := range []cache.SharedIndexInformer{factory.Core().V1().Pods().Informer(), factory.Batch().V1().Jobs().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			m.fail(fmt.Errorf("watch agents job: %w", err))
			stopInformers()
			return
		}
	}
	factory.Start(infCtx.Done())
	defer func() {
		stopInformers()
		factory.Shutdown()
	}()

	tick := time.NewTicker(m.checkEvery)
	defer tick.Stop()
	tr := newTracker(m.job.Name, m.cfg.PendingTimeout, m.now())
	var pending []Event
	for {
		var out chan<- Event
		var next Event
		if len(pending) > 0 {
			out, next = m.events, pending[0]
		}
		select {
		case <-m.stop:
			return
		case <-ctx.Done():
			m.cleanup(ctx)
			return
		case u := <-updates:
			pending = append(pending, m.observe(tr, u)...)
		case <-tick.C:
			tr.deleting = m.deleting.Load()
			evs := tr.check(m.now())
			for _, ev := range evs {
				m.log(tr, ev)
			}
			pending = append(pending, evs...)
		case out <- next:
			pending = pending[1:]
		}
		m.settle(tr)
	}
}

// update is one informer notification.
type update struct {
	obj  any
	gone bool
}

func (m *Manager) observe(tr *tracker, u update) []Event {
	// Read at each update: Delete sets it before its request, so every
	// removal it causes is seen with it set.
	tr.deleting = m.deleting.Load()
	var evs []Event
	switch o := u.obj.(type) {
	case *corev1.Pod:
		if u.gone {
			evs = tr.podGone(o)
		} else {
			evs = tr.pod(o, m.now())
		}
	case *batchv1.Job:
		if o.Name != m.job.Name {
			return nil
		}
		if u.gone {
			evs = tr.jobGone()
		} else {
			evs = tr.jobUpdate(o)
		}
	}
	for _, ev := range evs {
		m.log(tr, ev)
	}
	return evs
}

// log logs an event once: at Error for the fatal condition that ends the
// run, at Warn for later fatal ones and losses.
func (m *Manager) log(tr *tracker, ev Event) {
	l := m.logger.With("index", ev.Index, "pod", ev.Pod, "kind", string(ev.Kind), "reason", ev.Reason, "message", ev.Message)
	switch {
	case ev.Fatal && tr.err != nil && tr.err.Event == ev:
		l.Error("agents cannot run")
	case ev.Fatal:
		l.Warn("agent pod cannot run either")
	case ev.Kind.Lost():
		l.Warn("agent pod lost")
	case ev.Kind == KindUnschedulable || ev.Kind == KindErrImagePull:
		l.Warn("agent pod not starting")
	default:
		l.Debug("agent pod changed")
	}
}

// settle publishes the tracker's outcome.
func (m *Manager) settle(tr *tracker) {
	switch {
	case tr.err != nil:
		m.fail(tr.err)
	case tr.complete:
		m.finish()
	}
}

func (m *Manager) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished {
		return
	}
	m.err, m.finished = err, true
	close(m.done)
}

func (m *Manager) finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished {
		return
	}
	m.finished = true
	close(m.done)
}

// cleanup deletes the Job after Start's context ended.
func (m *Manager) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultCleanupTimeout)
	defer cancel()
	if err := m.Delete(ctx); err != nil {
		m.logger.Error("delete agents job", "error", err)
	}
}

// Delete deletes the Job with foreground propagation and waits until it
// and its pods are gone, or ctx ends. Deleting a Job that is already gone
// is not an error. Pod removals that follow are not reported as agent
// losses.
func (m *Manager) Delete(ctx context.Context) error {
	m.deleting.Store(true)
	jobs := m.cs.BatchV1().Jobs(m.cfg.Namespace)
	err := jobs.Delete(ctx, m.job.Name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete agents job %s/%s: %w", m.cfg.Namespace, m.job.Name, err)
	}
	m.logger.Info("deleting agents job")
	// Foreground: the Job stays, marked for deletion, until the garbage
	// collector has removed its pods.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := jobs.Get(ctx, m.job.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			m.logger.Debug("agents job deleted")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for agents job %s/%s to be deleted: %w", m.cfg.Namespace, m.job.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops the watcher and waits for it; Events is then closed. It
// does not delete the Job (see Delete). Start after Close fails.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
		if !m.started {
			// No watcher ever ran to close these.
			close(m.events)
			close(m.exited)
		}
	}
	m.mu.Unlock()
	<-m.exited
}
