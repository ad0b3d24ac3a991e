package kubejob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// StopTimeout bounds Agents.Stop's deletion of the Job; a second signal
// ends the process sooner.
const StopTimeout = 60 * time.Second

// EnvPodNamespace is the downward API variable naming the coordinator
// pod's namespace: the agents' default namespace, and with EnvPodName the
// pod whose image the agents run by default.
const EnvPodNamespace = "POD_NAMESPACE"

// lossQueue is how many agent losses wait for their reader; more are
// dropped and left to the coordinator's heartbeat timeout.
const lossQueue = 64

// inClusterNamespaceFile holds the pod's namespace in every pod with a
// ServiceAccount token mounted.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Loss is an agent gone for good, as the agents' Job saw it (a pod
// OOM-killed, failed or deleted): the agent's id, its pod's name, and why.
type Loss struct{ ID, Reason string }

// Agents is a run's agents Job, started by Start. Its methods are safe
// for concurrent use. A nil *Agents stands for no agents: Count is 0,
// Losses is nil and Stop does nothing.
type Agents struct {
	count  int
	losses chan Loss
	stop   func()
}

// Start runs the agents o describes for a run whose largest level is
// maxLevel: it connects to the API server (the in-cluster config, or
// $KUBECONFIG when set), creates the Job and follows its pods. The agents
// run o.Image, else the image of the pod this process runs in.
//
// The returned context is derived from ctx and canceled, with an *Error
// as its cause, when the agents cannot run (image pull failure,
// unschedulable, Job failed); see Cause. Stop the agents on every exit
// (defer Agents.Stop), or the Job outlives the run until ctx ends.
func Start(ctx context.Context, logger hclog.Logger, o Options, maxLevel int) (context.Context, *Agents, error) {
	restCfg, namespace, err := clientConfig(o.Namespace)
	if err != nil {
		return ctx, nil, err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return ctx, nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	return start(ctx, logger, cs, namespace, o, maxLevel)
}

// start is Start on a given client and namespace; opts tune the Manager.
func start(ctx context.Context, logger hclog.Logger, cs kubernetes.Interface, namespace string, o Options, maxLevel int, opts ...Option) (context.Context, *Agents, error) {
	logger = logger.Named("kube")
	if o.Image == "" {
		// Agents run the coordinator's own image unless told otherwise,
		// so pinning the image in one place pins both.
		var err error
		if o.Image, err = ownImage(ctx, cs); err != nil {
			return ctx, nil, err
		}
	}
	cfg, err := o.Config(namespace, maxLevel)
	if err != nil {
		return ctx, nil, fmt.Errorf("configure agents job: %w", err)
	}
	m, err := NewManager(cs, cfg, logger, opts...)
	if err != nil {
		return ctx, nil, err
	}
	if cfg.Owner == nil {
		logger.Warn("agents job has no owner: set POD_NAME and POD_UID from the downward API so the agents go when the coordinator pod does",
			"namespace", namespace)
	}
	if err := m.Start(ctx); err != nil {
		m.Close()
		return ctx, nil, err
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	a := &Agents{count: m.Agents(), losses: make(chan Loss, lossQueue)}
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		// A lost agent is reported at once (agents are named after their
		// pods); a fatal condition ends the run. Events closes once the
		// Manager is closed, or ctx ended and the Job is deleted.
		for ev := range m.Events() {
			if ev.Kind.Lost() && ev.Pod != "" {
				select {
				case a.losses <- Loss{ID: ev.Pod, Reason: ev.String()}:
				default:
				}
			}
			if ev.Fatal {
				cancel(&Error{Event: ev})
			}
		}
	}()
	a.stop = sync.OnceFunc(func() {
		// ctx may be canceled by a signal: deletion still gets its time.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
		defer scancel()
		if err := m.Delete(sctx); err != nil {
			logger.Error("delete agents job", "error", err)
		}
		m.Close()
		<-followed
		cancel(nil)
	})
	return runCtx, a, nil
}

// Count returns the number of agents the Job runs.
func (a *Agents) Count() int {
	if a == nil {
		return 0
	}
	return a.count
}

// Losses delivers the agents lost for good. It is never closed. A loss
// that finds it full is dropped, left to the coordinator's heartbeat
// timeout, so a slow or absent reader never stalls the agents' watch.
func (a *Agents) Losses() <-chan Loss {
	if a == nil {
		return nil
	}
	return a.losses
}

// Stop deletes the Job and its pods, waiting at most StopTimeout even
// when Start's context has already ended, stops following them and
// cancels the context Start returned. It may be called more than once;
// every call returns once the first has finished.
func (a *Agents) Stop() {
	if a != nil {
		a.stop()
	}
}

// Cause returns the agents' reason for ending the run, an *Error, when
// runErr came from that: ctx is a context Start returned, canceled by a
// fatal condition of the agents. Otherwise, including a nil runErr, it
// returns runErr.
func Cause(ctx context.Context, runErr error) error {
	var kerr *Error
	if cause := context.Cause(ctx); runErr != nil && errors.As(cause, &kerr) {
		return cause
	}
	return runErr
}

// ownImage returns the image of the first container of the pod this
// process runs in, named by $POD_NAMESPACE and $POD_NAME (the downward
// API), or "" when they are unset.
func ownImage(ctx context.Context, cs kubernetes.Interface) (string, error) {
	ns, name := os.Getenv(EnvPodNamespace), os.Getenv(EnvPodName)
	if ns == "" || name == "" {
		return "", nil
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the coordinator pod's image (or set --agent-image): %w", err)
	}
	if len(pod.Spec.Containers) == 0 {
		return "", nil
	}
	return pod.Spec.Containers[0].Image, nil
}

// RESTConfig returns the API server config, from $KUBECONFIG when set,
// else the in-cluster config, and the namespace to use: ns, else
// $POD_NAMESPACE, the pod's own, the kubeconfig context's, or "default".
func RESTConfig(ns string) (*rest.Config, string, error) { return clientConfig(ns) }

// clientConfig returns the API server config, from $KUBECONFIG when set,
// else the in-cluster config in a pod, else ~/.kube/config as kubectl
// reads it, and the namespace to use: ns, else $POD_NAMESPACE, the pod's
// own, the kubeconfig context's, or "default".
func clientConfig(ns string) (*rest.Config, string, error) {
	var cfg *rest.Config
	kubeNS := ""
	path := os.Getenv("KUBECONFIG")
	if path == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
			path = clientcmd.RecommendedHomeFile
		}
	}
	if path != "" {
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
		var err error
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("load kubeconfig %s: %w", path, err)
		}
		kubeNS, _, _ = loader.Namespace()
	} else {
		var err error
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, "", fmt.Errorf("load in-cluster config (outside a cluster, set KUBECONFIG or write ~/.kube/config): %w", err)
		}
	}
	// client-go's defaults (5 QPS) would delay the Job, watches and
	// deletion behind each other.
	cfg.QPS, cfg.Burst = 20, 40
	if ns == "" {
		ns = os.Getenv(EnvPodNamespace)
	}
	if ns == "" {
		if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = kubeNS
	}
	if ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}
