package kubejob

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// Defaults of the flags AddFlags registers that Config has no default for.
const (
	// DefaultTokenSecret is the Secret name/key holding the agent token
	// (--token-secret), as the deploy manifests create it.
	DefaultTokenSecret = "fleetbench-agent-token/" + DefaultTokenKey
	// DefaultCoordinatorService is the host:port agents dial
	// (--coordinator-service): the coordinator's Service.
	DefaultCoordinatorService = "fleetbench-coordinator:7070"
	// DefaultAgentMetricsPort is the port each agent pod serves its own
	// metrics on (--agent-metrics-port): next to the coordinator's 9090.
	DefaultAgentMetricsPort = 9091
)

// Options are a command's settings for running its agents as an Indexed
// Job, as the user typed them: AddFlags binds them to flags, Config turns
// them into a Config, Start runs the agents. Only AddFlags sets the
// flags' defaults; a zero Options has none (no token Secret, no service,
// no retries). Options is plain data, safe to copy.
type Options struct {
	// Enabled runs the agents in the cluster (--kube-agents).
	Enabled bool
	// Namespace holds the Job; empty: the coordinator pod's, else the
	// kubeconfig's.
	Namespace string
	// Image is the agents' image; empty: the coordinator pod's own.
	Image string
	// PullPolicy is Always, IfNotPresent, Never or empty.
	PullPolicy string
	// PullSecrets name image pull Secrets.
	PullSecrets []string
	// Capacity is the sessions per agent; with it and without AgentsSet
	// the agent count is derived from the largest level.
	Capacity int
	// CPU and Memory are Kubernetes quantities (see ParseResources).
	CPU, Memory string
	// NodeSelector holds "k=v[,k=v]" items (see ParseNodeSelector).
	NodeSelector []string
	// Tolerations holds "key[=value][:effect]" items (see ParseToleration).
	Tolerations []string
	// Spread is ScheduleAnyway, DoNotSchedule or None.
	Spread string
	// PortRange is the agents' ip_local_port_range, "-" for the node's.
	PortRange string
	// HostNetwork runs the agents in the node's network namespace.
	HostNetwork bool
	// MetricsPort is the port agents serve their metrics on; 0: none.
	MetricsPort int
	// Overcommit skips the check that each agent's share of the largest
	// level fits its CPU request (SessionsPerCore).
	Overcommit bool
	// TokenSecret is the agent token's Secret "name[/key]"; empty: none.
	TokenSecret string
	// TokenAsEnv gives agents the token as $FLEETBENCH_TOKEN, not a file.
	TokenAsEnv bool
	// APIKeySecret is the model server API key's Secret "name[/key]".
	APIKeySecret string
	// APIKeyEnv is the agents' environment variable for the API key.
	APIKeyEnv string
	// Service is the host:port agents dial.
	Service string
	// PendingTimeout fails the run when an agent stays Pending this long.
	PendingTimeout time.Duration
	// Retries is how often a failed agent index is replaced.
	Retries int
	// AgentArgs are extra flags for every agent.
	AgentArgs []string
	// SecretEnv holds "ENV=name[/key]" items (see ParseSecretEnv).
	SecretEnv []string
	// Mounts holds "KIND:NAME:PATH" items (see ParseMount).
	Mounts []string

	// Agents is the command's agent count (its --agents, or a sweep
	// spec's), which the caller owns and sets. AgentsSet reports that the
	// user gave it on the command line: then it wins over Capacity;
	// otherwise Capacity, when set, decides the count.
	Agents    int
	AgentsSet bool
}

// AddFlags registers the options' flags on fs, with their defaults. It
// does not register --agents: the command owns it and sets Agents and
// AgentsSet. Repeatable flags are string arrays: a value may hold commas.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "kube-agents", false, "run the agents as an Indexed Job in this cluster (in-cluster config or $KUBECONFIG)")
	fs.StringVar(&o.Namespace, "kube-namespace", "", "namespace of the agents' Job (default: the coordinator pod's, or the kubeconfig's)")
	fs.StringVar(&o.Image, "agent-image", "", "fleetbench image the agents run (default: the coordinator pod's own, from $POD_NAMESPACE and $POD_NAME)")
	fs.StringVar(&o.PullPolicy, "agent-pull-policy", "", "agent image pull policy: Always, IfNotPresent or Never")
	fs.StringArrayVar(&o.PullSecrets, "agent-pull-secret", nil, "image pull Secret for the agent image (repeatable)")
	fs.IntVar(&o.Capacity, "agent-capacity", 0, "sessions per agent; with --kube-agents, agents = ceil(largest level / capacity)")
	fs.StringVar(&o.CPU, "agent-cpu", DefaultAgentCPU, "CPU each agent requests; it sizes the agents: "+strconv.Itoa(SessionsPerCore)+" sessions per core (\"\": none, a BestEffort pod)")
	fs.StringVar(&o.Memory, "agent-memory", DefaultAgentMemory, "memory each agent requests and is limited to (\"\": none)")
	fs.IntVar(&o.MetricsPort, "agent-metrics-port", DefaultAgentMetricsPort, "port each agent serves its own /metrics on (agent --metrics-listen; the pods' \"metrics\" port, scraped by the agents' PodMonitor); 0: none; not with --agent-host-network")
	fs.BoolVar(&o.Overcommit, "agent-overcommit", false, "run agents whose share of the largest level exceeds what their --agent-cpu serves")
	fs.StringArrayVar(&o.NodeSelector, "node-selector", nil, "agent node selector k=v[,k=v] (repeatable)")
	fs.StringArrayVar(&o.Tolerations, "toleration", nil, "agent toleration key[=value][:effect] (repeatable)")
	fs.StringVar(&o.Spread, "agent-spread", string(corev1.ScheduleAnyway), "spread agents over nodes: ScheduleAnyway, DoNotSchedule or None")
	fs.StringVar(&o.PortRange, "agent-port-range", DefaultPortRange, `agents' net.ipv4.ip_local_port_range ("-": the node's)`)
	fs.BoolVar(&o.HostNetwork, "agent-host-network", false, "run the agents in the node's network namespace (hostNetwork; --agent-port-range then does not apply)")
	fs.StringVar(&o.TokenSecret, "token-secret", DefaultTokenSecret, `Secret name/key with the agent token ("": agents present none)`)
	fs.BoolVar(&o.TokenAsEnv, "token-secret-env", false, "give agents the token as $"+EnvToken+" instead of a file")
	fs.StringVar(&o.APIKeySecret, "api-key-secret", "", "Secret name/key with the model server's API key for the agents")
	fs.StringVar(&o.APIKeyEnv, "agent-api-key-env", DefaultAPIKeyEnv, "agents' environment variable for the API key")
	fs.StringVar(&o.Service, "coordinator-service", DefaultCoordinatorService, "host:port agents dial (the coordinator's Service)")
	fs.DurationVar(&o.PendingTimeout, "pending-timeout", DefaultPendingTimeout, "fail when an agent pod stays Pending this long")
	fs.IntVar(&o.Retries, "agent-retries", DefaultBackoffLimitPerIndex, "times a failed agent is replaced (per index)")
	fs.StringArrayVar(&o.AgentArgs, "agent-arg", nil, "extra flag for every agent, e.g. --agent-arg=--endpoint=chat (repeatable)")
	fs.StringArrayVar(&o.Mounts, "agent-mount", nil, "mount a volume read-only in every agent: KIND:NAME:PATH with KIND pvc, configmap or secret (repeatable), e.g. pvc:sharegpt:/data for a dataset")
	fs.StringArrayVar(&o.SecretEnv, "agent-secret-env", nil, "give agents environment variable ENV from a Secret key: ENV=name[/key] (key defaults to ENV; repeatable), e.g. a user model's key")
}

// explicitAgents returns Agents when it decides the count: given on the
// command line, or without Capacity. Else 0: derive it from the largest
// level.
func (o Options) explicitAgents() int {
	if o.Capacity == 0 || o.AgentsSet {
		return o.Agents
	}
	return 0
}

// Check validates the options as Config does, before the image and the
// namespace are resolved (at Start, from the cluster), so that a bad flag
// fails at once with its own message, before any probe of the target or
// the cluster. Placeholders stand for the image and the namespace when
// they are not given.
func (o Options) Check(maxLevel int) error {
	if !o.Enabled {
		return nil
	}
	if o.Image == "" {
		o.Image = "image.invalid/resolved-at-start"
	}
	ns := o.Namespace
	if ns == "" {
		ns = "default"
	}
	_, err := o.Config(ns, maxLevel)
	return err
}

// Config turns the options into the Job's config for namespace, the
// largest level being maxLevel (which sizes the Job with Capacity). The
// Owner comes from the environment (OwnerFromEnv). The config is
// validated; a value that fails to parse is reported with its flag.
func (o Options) Config(namespace string, maxLevel int) (Config, error) {
	cfg := Config{
		Namespace:            namespace,
		Image:                o.Image,
		PullPolicy:           corev1.PullPolicy(o.PullPolicy),
		ImagePullSecrets:     o.PullSecrets,
		AgentCapacity:        o.Capacity,
		MaxLevel:             maxLevel,
		Spread:               corev1.UnsatisfiableConstraintAction(o.Spread),
		PortRange:            o.PortRange,
		HostNetwork:          o.HostNetwork,
		MetricsPort:          o.MetricsPort,
		CoordinatorAddr:      o.Service,
		TokenAsEnv:           o.TokenAsEnv,
		APIKeyEnv:            o.APIKeyEnv,
		Args:                 o.AgentArgs,
		PendingTimeout:       o.PendingTimeout,
		BackoffLimitPerIndex: new(int32(o.Retries)),
		Owner:                OwnerFromEnv(),
		Agents:               o.explicitAgents(),
	}
	switch o.PullPolicy {
	case "", string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever):
	default:
		return cfg, fmt.Errorf("parse --agent-pull-policy %q: want Always, IfNotPresent or Never", o.PullPolicy)
	}
	var err error
	if cfg.Token, err = ParseSecretRef(o.TokenSecret, DefaultTokenKey); err != nil {
		return cfg, fmt.Errorf("parse --token-secret: %w", err)
	}
	if cfg.APIKey, err = ParseSecretRef(o.APIKeySecret, DefaultAPIKeyKey); err != nil {
		return cfg, fmt.Errorf("parse --api-key-secret: %w", err)
	}
	for _, s := range o.Mounts {
		m, err := ParseMount(s)
		if err != nil {
			return cfg, fmt.Errorf("parse --agent-mount: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, m)
	}
	for _, s := range o.SecretEnv {
		ev, err := ParseSecretEnv(s)
		if err != nil {
			return cfg, err
		}
		cfg.Env = append(cfg.Env, ev)
	}
	if cfg.Resources, err = ParseResources(o.CPU, o.Memory); err != nil {
		return cfg, err
	}
	if cfg.NodeSelector, err = ParseNodeSelector(o.NodeSelector); err != nil {
		return cfg, err
	}
	for _, s := range o.Tolerations {
		tol, err := ParseToleration(s)
		if err != nil {
			return cfg, err
		}
		cfg.Tolerations = append(cfg.Tolerations, tol)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if !o.Overcommit && o.Capacity == 0 {
		if err := checkShare(cfg.AgentCount(), maxLevel, cfg.Resources); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Agent sizing, measured by `make bench` (BenchmarkClosedLoop,
// cores/1k-streams and MiB/1k-streams) on a 2-core machine: one agent
// streaming 1,000 sessions of 20 tokens/s each used 0.23-0.37 cores and
// 28-32 MiB. SessionsPerCore leaves room for twice that token rate and for
// document chats' longer histories; DefaultAgentCPU and
// DefaultAgentMemory make agents Burstable pods sized for
// SessionsPerCore sessions. deploy/README.md has the sizing table.
const (
	SessionsPerCore    = 1500
	DefaultAgentCPU    = "1"
	DefaultAgentMemory = "1Gi"
)

// checkShare refuses a plan that gives each of agents more sessions than
// its CPU request serves (SessionsPerCore per core): an overloaded agent
// inflates the latencies it measures. No CPU request (BestEffort): no
// check.
func checkShare(agents, maxLevel int, res corev1.ResourceRequirements) error {
	cpu, ok := res.Requests[corev1.ResourceCPU]
	if !ok || agents <= 0 || maxLevel <= 0 {
		return nil
	}
	capacity := int(float64(cpu.MilliValue()) / 1000 * SessionsPerCore)
	share := (maxLevel + agents - 1) / agents
	if share <= capacity {
		return nil
	}
	need := (maxLevel + capacity - 1) / max(capacity, 1)
	return fmt.Errorf("each of %d agents would run %d sessions (largest level %d), more than the %d that --agent-cpu %s serves "+
		"(%d per core, measured by make bench): use --agents %d, or more --agent-cpu, or --agent-overcommit to run anyway",
		agents, share, maxLevel, capacity, cpu.String(), SessionsPerCore, need)
}
