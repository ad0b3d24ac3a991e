package kubeswitch

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// Switch kinds this package registers.
const (
	// KindDynamo sets an environment variable of one service of an NVIDIA
	// Dynamo DynamoGraphDeployment.
	KindDynamo = "dynamo"
	// KindKubeAI sets the load-balancing strategy of a kubeai Model.
	KindKubeAI = "kubeai"
	// KindPatch patches any resource, then optionally restarts a Deployment
	// and waits for its rollout.
	KindPatch = "patch"
	// KindKubernetes is another name for KindPatch.
	KindKubernetes = "kubernetes"
)

// Defaults of the common options.
const (
	// DefaultDynamoTimeout bounds a dynamo switch: a restarted worker of a
	// 70B model loads its weights for minutes.
	DefaultDynamoTimeout = 15 * time.Minute
	// DefaultTimeout bounds a kubeai or patch switch.
	DefaultTimeout = 10 * time.Minute
	// DefaultPollInterval is how often a switch looks at the cluster while
	// it waits.
	DefaultPollInterval = 2 * time.Second
)

var registerOnce sync.Once

// Register adds the kinds dynamo, kubeai, patch and kubernetes (an alias of
// patch) to sweep's switch registry. Call it from main before a sweep spec
// is validated; calling it again does nothing. It is safe for concurrent
// use.
func Register() {
	registerOnce.Do(func() {
		for _, k := range []string{KindDynamo, KindKubeAI, KindPatch, KindKubernetes} {
			sweep.Register(k, func(cfg sweep.SwitchSpec, env sweep.SwitchEnv) (sweep.Switcher, error) {
				return New(cfg, env)
			})
		}
	})
}

// Option adjusts a switch built by New.
type Option func(*settings)

// WithRESTConfig makes the switch talk to the cluster with cfg instead of
// the kubeconfig or in-cluster configuration the options name. Tests use
// it to act as a ServiceAccount.
func WithRESTConfig(cfg *rest.Config) Option {
	return func(s *settings) { s.rest = rest.CopyConfig(cfg) }
}

// settings are the options every kind shares.
type settings struct {
	namespace  string
	kubeconfig string
	context    string
	inCluster  bool
	timeout    time.Duration
	poll       time.Duration
	rest       *rest.Config
}

// New builds the switch of cfg.Kind (one of the Kind constants) from its
// options. Like every sweep.Factory it only checks and stores them: the
// cluster is first contacted by Switch or Current.
func New(cfg sweep.SwitchSpec, env sweep.SwitchEnv, opts ...Option) (sweep.Switcher, error) {
	if env.Logger == nil {
		env.Logger = hclog.NewNullLogger()
	}
	o := newOptionSet(cfg.Options)
	var s settings
	s.namespace = o.str("namespace", "")
	s.kubeconfig = o.str("kubeconfig", "")
	s.context = o.str("context", "")
	s.inCluster = o.boolean("in_cluster", false)
	if s.inCluster && (s.kubeconfig != "" || s.context != "") {
		o.errorf("option in_cluster excludes kubeconfig and context")
	}
	def := DefaultTimeout
	if cfg.Kind == KindDynamo {
		def = DefaultDynamoTimeout
	}
	if cfg.Timeout > 0 {
		def = cfg.Timeout.D()
	}
	s.timeout = o.duration("timeout", def)
	s.poll = o.duration("poll_interval", DefaultPollInterval)
	for _, opt := range opts {
		opt(&s)
	}
	log := env.Logger.Named("switch").With("kind", cfg.Kind)
	var (
		sw  sweep.Switcher
		err error
	)
	switch cfg.Kind {
	case KindDynamo:
		sw, err = newDynamo(cfg, o, s, log)
	case KindKubeAI:
		sw, err = newKubeAI(cfg, o, s, log)
	case KindPatch, KindKubernetes:
		sw, err = newPatch(cfg, o, s, log)
	default:
		return nil, fmt.Errorf("kubeswitch: unknown kind %q", cfg.Kind)
	}
	if err != nil {
		return nil, err
	}
	return sw, nil
}

// saNamespaceFile holds the namespace of a pod's ServiceAccount.
const saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// podNamespace is the namespace this process runs in as a pod, else
// "default".
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(saNamespaceFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b))
	}
	return "default"
}

// conn connects to the cluster on first use and keeps the clients. A
// failure is not kept, so a later call tries again. Safe for concurrent
// use.
type conn struct {
	s  settings
	mu sync.Mutex
	c  *clients
}

// clients are the connected clients and the namespace to act in.
type clients struct {
	dyn dynamic.Interface
	cs  kubernetes.Interface
	ns  string
}

func (c *conn) get() (*clients, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		return c.c, nil
	}
	cfg, ns, err := c.s.restConfig()
	if err != nil {
		return nil, err
	}
	if c.s.namespace != "" {
		ns = c.s.namespace
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new dynamic client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new clientset: %w", err)
	}
	c.c = &clients{dyn: dyn, cs: cs, ns: ns}
	return c.c, nil
}

// restConfig returns the configuration to connect with and the namespace
// it implies: the kubeconfig's context namespace, or the pod's own
// namespace in a cluster, else "default".
func (s settings) restConfig() (*rest.Config, string, error) {
	if s.rest != nil {
		return s.rest, "default", nil
	}
	if s.inCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("load in-cluster config: %w", err)
		}
		return cfg, podNamespace(), nil
	}
	// The deferred loader reads $KUBECONFIG or ~/.kube/config and falls
	// back to the in-cluster configuration when there is neither, which is
	// what a coordinator running as a Job needs.
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = s.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("read kubeconfig namespace: %w", err)
	}
	return cfg, ns, nil
}
