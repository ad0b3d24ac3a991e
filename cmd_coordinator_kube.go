package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// kubeStopTimeout bounds the deletion of the agents' Job when the
// coordinator exits; a second signal ends the process sooner.
const kubeStopTimeout = 60 * time.Second

// inClusterNamespaceFile holds the pod's namespace in every pod with a
// ServiceAccount token mounted.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// kubeFlags are the coordinator's flags for running its agents as an
// Indexed Job in the cluster it runs in (--kube-agents).
type kubeFlags struct {
	fs *flag.FlagSet

	enabled        bool
	namespace      string
	image          string
	pullPolicy     string
	pullSecrets    listFlag
	capacity       int
	cpu, memory    string
	nodeSelector   listFlag
	tolerations    listFlag
	spread         string
	portRange      string
	tokenSecret    string
	tokenEnv       bool
	apiKeySecret   string
	apiKeyEnv      string
	service        string
	pendingTimeout time.Duration
	backoff        int
	agentArgs      listFlag
	secretEnv      listFlag
	mounts         listFlag
	// specAgents, when > 0, is the agent count of a sweep's spec (its
	// agents field or --agents flag), used instead of the --agents flag's
	// value.
	specAgents int
}

// addKubeFlags registers the --kube-agents flags on the coordinator's
// flag set. The agent count is the coordinator's --agents unless
// --agent-capacity is given, in which case it is derived from the largest
// level.
func addKubeFlags(fs *flag.FlagSet) *kubeFlags {
	f := &kubeFlags{fs: fs}
	fs.BoolVar(&f.enabled, "kube-agents", false, "run the agents as an Indexed Job in this cluster (in-cluster config or $KUBECONFIG)")
	fs.StringVar(&f.namespace, "kube-namespace", "", "namespace of the agents' Job (default: the coordinator pod's, or the kubeconfig's)")
	fs.StringVar(&f.image, "agent-image", "", "fleetbench image the agents run (default: the coordinator pod's own, from $POD_NAMESPACE and $POD_NAME)")
	fs.StringVar(&f.pullPolicy, "agent-pull-policy", "", "agent image pull policy: Always, IfNotPresent or Never")
	fs.Var(&f.pullSecrets, "agent-pull-secret", "image pull Secret for the agent image (repeatable)")
	fs.IntVar(&f.capacity, "agent-capacity", 0, "sessions per agent; with --kube-agents, agents = ceil(largest level / capacity)")
	fs.StringVar(&f.cpu, "agent-cpu", "", "CPU each agent requests (e.g. 2)")
	fs.StringVar(&f.memory, "agent-memory", "", "memory each agent requests and is limited to (e.g. 1Gi)")
	fs.Var(&f.nodeSelector, "node-selector", "agent node selector k=v[,k=v] (repeatable)")
	fs.Var(&f.tolerations, "toleration", "agent toleration key[=value][:effect] (repeatable)")
	fs.StringVar(&f.spread, "agent-spread", string(corev1.ScheduleAnyway), "spread agents over nodes: ScheduleAnyway, DoNotSchedule or None")
	fs.StringVar(&f.portRange, "agent-port-range", kubejob.DefaultPortRange, `agents' net.ipv4.ip_local_port_range ("-": the node's)`)
	fs.StringVar(&f.tokenSecret, "token-secret", "fleetbench-agent-token/token", `Secret name/key with the agent token ("": agents present none)`)
	fs.BoolVar(&f.tokenEnv, "token-secret-env", false, "give agents the token as $"+tokenEnv+" instead of a file")
	fs.StringVar(&f.apiKeySecret, "api-key-secret", "", "Secret name/key with the model server's API key for the agents")
	fs.StringVar(&f.apiKeyEnv, "agent-api-key-env", kubejob.DefaultAPIKeyEnv, "agents' environment variable for the API key")
	fs.StringVar(&f.service, "coordinator-service", "fleetbench-coordinator:7070", "host:port agents dial (the coordinator's Service)")
	fs.DurationVar(&f.pendingTimeout, "pending-timeout", kubejob.DefaultPendingTimeout, "fail when an agent pod stays Pending this long")
	fs.IntVar(&f.backoff, "agent-retries", kubejob.DefaultBackoffLimitPerIndex, "times a failed agent is replaced (per index)")
	fs.Var(&f.agentArgs, "agent-arg", "extra flag for every agent, e.g. --agent-arg=--endpoint=chat (repeatable)")
	fs.Var(&f.mounts, "agent-mount", "mount a volume read-only in every agent: KIND:NAME:PATH with KIND pvc, configmap or secret (repeatable), e.g. pvc:sharegpt:/data for a dataset")
	fs.Var(&f.secretEnv, "agent-secret-env", "give agents environment variable ENV from a Secret key: ENV=name[/key] (key defaults to ENV; repeatable), e.g. a user model's key")
	return f
}

// parseSecretEnv parses ENV=name[/key] into an environment variable read
// from that Secret key.
func parseSecretEnv(s string) (corev1.EnvVar, error) {
	name, ref, ok := strings.Cut(s, "=")
	if !ok || name == "" || ref == "" || strings.ContainsAny(name, "= ") {
		return corev1.EnvVar{}, fmt.Errorf("parse --agent-secret-env %q: want ENV=name[/key]", s)
	}
	sr, err := kubejob.ParseSecretRef(ref, name)
	if err != nil {
		return corev1.EnvVar{}, fmt.Errorf("parse --agent-secret-env %q: %w", s, err)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: sr.Name}, Key: sr.Key,
	}}}, nil
}

// agents returns the coordinator's --agents value (a sweep's: its spec's).
func (f *kubeFlags) agents() int {
	if f.specAgents > 0 {
		return f.specAgents
	}
	if fl := f.fs.Lookup("agents"); fl != nil {
		n, _ := strconv.Atoi(fl.Value.String())
		return n
	}
	return 0
}

// agentsSet reports whether --agents was given on the command line.
func (f *kubeFlags) agentsSet() bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "agents" })
	return set
}

// agentCount returns the number of agents the flags ask for, given the
// largest level.
func (f *kubeFlags) agentCount(maxLevel int) int {
	return kubejob.Config{Agents: f.explicitAgents(), AgentCapacity: f.capacity, MaxLevel: maxLevel}.AgentCount()
}

// explicitAgents returns --agents when it decides the count: given on the
// command line, or without --agent-capacity. Else 0: derive it.
func (f *kubeFlags) explicitAgents() int {
	if f.capacity == 0 || f.agentsSet() {
		return f.agents()
	}
	return 0
}

// config turns the flags into the Job's config. With --agent-capacity the
// count is derived from maxLevel unless --agents was given as well.
func (f *kubeFlags) config(namespace string, maxLevel int) (kubejob.Config, error) {
	cfg := kubejob.Config{
		Namespace:            namespace,
		Image:                f.image,
		PullPolicy:           corev1.PullPolicy(f.pullPolicy),
		ImagePullSecrets:     f.pullSecrets,
		AgentCapacity:        f.capacity,
		MaxLevel:             maxLevel,
		Spread:               corev1.UnsatisfiableConstraintAction(f.spread),
		PortRange:            f.portRange,
		CoordinatorAddr:      f.service,
		TokenAsEnv:           f.tokenEnv,
		APIKeyEnv:            f.apiKeyEnv,
		Args:                 f.agentArgs,
		PendingTimeout:       f.pendingTimeout,
		BackoffLimitPerIndex: new(int32(f.backoff)),
		Owner:                kubejob.OwnerFromEnv(),
		Agents:               f.explicitAgents(),
	}
	switch f.pullPolicy {
	case "", string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever):
	default:
		return cfg, fmt.Errorf("parse --agent-pull-policy %q: want Always, IfNotPresent or Never", f.pullPolicy)
	}
	var err error
	if cfg.Token, err = kubejob.ParseSecretRef(f.tokenSecret, kubejob.DefaultTokenKey); err != nil {
		return cfg, fmt.Errorf("parse --token-secret: %w", err)
	}
	if cfg.APIKey, err = kubejob.ParseSecretRef(f.apiKeySecret, kubejob.DefaultAPIKeyKey); err != nil {
		return cfg, fmt.Errorf("parse --api-key-secret: %w", err)
	}
	for _, s := range f.mounts {
		m, err := kubejob.ParseMount(s)
		if err != nil {
			return cfg, fmt.Errorf("parse --agent-mount: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, m)
	}
	for _, s := range f.secretEnv {
		ev, err := parseSecretEnv(s)
		if err != nil {
			return cfg, err
		}
		cfg.Env = append(cfg.Env, ev)
	}
	if cfg.Resources, err = parseResources(f.cpu, f.memory); err != nil {
		return cfg, err
	}
	if cfg.NodeSelector, err = parseNodeSelector(f.nodeSelector); err != nil {
		return cfg, err
	}
	for _, s := range f.tolerations {
		tol, err := parseToleration(s)
		if err != nil {
			return cfg, err
		}
		cfg.Tolerations = append(cfg.Tolerations, tol)
	}
	return cfg, cfg.Validate()
}

// startKubeAgents creates the agents' Job and watches its pods. It
// returns stop, which deletes the Job and its pods and stops the watcher
// (the caller defers it, so a signal or an error still removes the
// agents), and the pods' events: agent losses (Kind.Lost) and, with
// Fatal set, conditions the run cannot survive (each logged by the
// watcher already). The events channel is closed by stop, or when ctx
// ends, after the Job has been deleted; read it until then.
func startKubeAgents(ctx context.Context, logger hclog.Logger, f *kubeFlags, maxLevel int) (stop func(context.Context) error, events <-chan kubejob.Event, err error) {
	restCfg, namespace, err := kubeClientConfig(f.namespace)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	if f.image == "" {
		// Agents run the coordinator's own image unless told otherwise,
		// so pinning the image in one place pins both.
		if f.image, err = ownImage(ctx, cs); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := f.config(namespace, maxLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("configure agents job: %w", err)
	}
	m, err := kubejob.NewManager(cs, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Owner == nil {
		logger.Warn("agents job has no owner: set POD_NAME and POD_UID from the downward API so the agents go when the coordinator pod does",
			"namespace", namespace)
	}
	if err := m.Start(ctx); err != nil {
		m.Close()
		return nil, nil, err
	}
	stop = func(ctx context.Context) error {
		err := m.Delete(ctx)
		m.Close()
		return err
	}
	return stop, m.Events(), nil
}

// ownImage returns the image of the first container of the pod this
// process runs in, named by $POD_NAMESPACE and $POD_NAME (the downward
// API), or "" when they are unset.
func ownImage(ctx context.Context, cs kubernetes.Interface) (string, error) {
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv(kubejob.EnvPodName)
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

// agentLoss is an agent gone for good, as the agents' Job saw it: the
// agent's id (its pod's name) and why. It is fleet.Loss, so the losses go
// to fleet.Serve as they are.
type agentLoss = fleet.Loss

// lossQueue is how many agent losses wait for the coordinator; more are
// dropped and left to its heartbeat timeout.
const lossQueue = 64

// startKubeAgentsFor is the commands' entry point: when --kube-agents is
// set it sizes the fleet from cfg's stages (setting cfg.Agents), starts
// the agents' Job, and returns a context derived from ctx that is
// canceled, with a *kubejob.Error as its cause, when the agents cannot
// run (image pull failure, unschedulable, Job failed). Agents lost for
// good (a pod OOM-killed, failed or deleted) are sent on the returned
// channel, which is never closed, without blocking: a loss that finds it
// full is left to the coordinator's heartbeat timeout. stop deletes the
// Job and waits for it (bounded by kubeStopTimeout); defer it. Without
// --kube-agents it returns ctx, a nil channel and a no-op.
func (f *kubeFlags) startKubeAgentsFor(ctx context.Context, logger hclog.Logger, cfg *coordinator.Config) (context.Context, <-chan agentLoss, func(), error) {
	if !f.enabled {
		return ctx, nil, func() {}, nil
	}
	maxLevel := 0
	for _, s := range cfg.Stages {
		maxLevel = max(maxLevel, s.Level)
	}
	logger = logger.Named("kube")
	stopJob, events, err := startKubeAgents(ctx, logger, f, maxLevel)
	if err != nil {
		return ctx, nil, func() {}, err
	}
	cfg.Agents = f.agentCount(maxLevel)

	runCtx, cancel := context.WithCancelCause(ctx)
	losses := make(chan agentLoss, lossQueue)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		// A lost agent is reported at once (agents are named after their
		// pods); a fatal condition ends the run.
		for ev := range events {
			if ev.Kind.Lost() && ev.Pod != "" {
				select {
				case losses <- agentLoss{ID: ev.Pod, Reason: ev.String()}:
				default:
				}
			}
			if ev.Fatal {
				cancel(&kubejob.Error{Event: ev})
			}
		}
	}()
	stop := func() {
		// ctx may be canceled by a signal: deletion still gets its time.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), kubeStopTimeout)
		defer scancel()
		if err := stopJob(sctx); err != nil {
			logger.Error("delete agents job", "error", err)
		}
		<-followed
		cancel(nil)
	}
	return runCtx, losses, stop, nil
}

// kubeCause returns the reason the agents stopped the run when runErr
// came from that cancellation, else runErr.
func kubeCause(ctx context.Context, runErr error) error {
	var kerr *kubejob.Error
	if cause := context.Cause(ctx); runErr != nil && errors.As(cause, &kerr) {
		return cause
	}
	return runErr
}

// kubeClientConfig returns the API server config, from $KUBECONFIG when
// set, else the in-cluster config, and the namespace to use: ns, else
// $POD_NAMESPACE, the pod's own, the kubeconfig context's, or "default".
func kubeClientConfig(ns string) (*rest.Config, string, error) {
	var cfg *rest.Config
	kubeNS := ""
	if path := os.Getenv("KUBECONFIG"); path != "" {
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
			return nil, "", fmt.Errorf("load in-cluster config (outside a cluster, set KUBECONFIG): %w", err)
		}
	}
	// client-go's defaults (5 QPS) would delay the Job, watches and
	// deletion behind each other.
	cfg.QPS, cfg.Burst = 20, 40
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
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

// parseResources returns the agent container's resources: the CPU as a
// request only (a CPU limit throttles the agent and skews its latency
// measurements), the memory as request and limit (an agent over it is
// OOM-killed and reported, not left to starve its node).
func parseResources(cpu, memory string) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	if cpu != "" {
		q, err := resource.ParseQuantity(cpu)
		if err != nil {
			return r, fmt.Errorf("parse --agent-cpu %q: %w", cpu, err)
		}
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: q}
	}
	if memory != "" {
		q, err := resource.ParseQuantity(memory)
		if err != nil {
			return r, fmt.Errorf("parse --agent-memory %q: %w", memory, err)
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceMemory] = q
		r.Limits = corev1.ResourceList{corev1.ResourceMemory: q}
	}
	return r, nil
}

// parseNodeSelector parses "k=v,k2=v2" items.
func parseNodeSelector(items []string) (map[string]string, error) {
	var out map[string]string
	for _, item := range items {
		for kv := range strings.SplitSeq(item, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("parse --node-selector %q: want key=value", kv)
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out, nil
}

// parseToleration parses kubectl's taint syntax: "key=value:Effect"
// (operator Equal), "key:Effect" or "key" (operator Exists); no effect
// tolerates every effect.
func parseToleration(s string) (corev1.Toleration, error) {
	var t corev1.Toleration
	rest, effect, hasEffect := strings.Cut(s, ":")
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("parse --toleration %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s, effect)
		}
	}
	key, value, hasValue := strings.Cut(rest, "=")
	if key == "" {
		return t, fmt.Errorf("parse --toleration %q: want key[=value][:effect]", s)
	}
	t.Key = key
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	} else {
		t.Operator = corev1.TolerationOpExists
	}
	return t, nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}
