package kubejob

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Config's optional fields.
const (
	// DefaultName is the Job name prefix.
	DefaultName = "fleetbench-agents"
	// DefaultPortRange is the agents' net.ipv4.ip_local_port_range: one
	// agent opens thousands of connections, more than the kernel's default
	// range (32768-60999) leaves room for once TIME_WAIT piles up.
	DefaultPortRange = "1024 65535"
	// DefaultPendingTimeout is how long an agent pod may stay Pending
	// (unscheduled, or scheduled with containers not started) before the
	// run fails.
	DefaultPendingTimeout = 2 * time.Minute
	// DefaultBackoffLimitPerIndex is how many times a failed agent index is
	// replaced before it is given up.
	DefaultBackoffLimitPerIndex = 1
	// DefaultTTLAfterFinished is how long a finished Job is kept when
	// nobody deletes it (a coordinator killed with SIGKILL and no Owner).
	DefaultTTLAfterFinished = time.Hour
	// DefaultTokenKey and DefaultAPIKeyKey are the Secret keys used when a
	// SecretRef names no key.
	DefaultTokenKey  = "token"
	DefaultAPIKeyKey = "api-key"
	// DefaultAPIKeyEnv is the agent's environment variable for the model
	// server's API key (the agent's --api-key-env default).
	DefaultAPIKeyEnv = "OPENAI_API_KEY"
	// TokenDir is where the token Secret is mounted in agent pods.
	TokenDir = "/var/run/secrets/fleetbench"
	// TokenFile is the file agents read the token from.
	TokenFile = TokenDir + "/token"
	// ContainerName names the agent container.
	ContainerName = "agent"
	// MetricsPortName names the agent container's metrics port, which the
	// agents' PodMonitor (deploy/base/podmonitor.yaml) scrapes.
	MetricsPortName = "metrics"
	// ExitUsage is the agent's exit code for a usage mistake: a bad flag
	// will not get better by retrying, so it fails the Job at once.
	ExitUsage = 2
)

// Labels fleetbench puts on the Job and its pods. LabelAgents selects the
// pods of one Job, LabelRun tells this run's Job from others'.
const (
	LabelAgents    = "fleetbench.io/agents"
	LabelRun       = "fleetbench.io/run"
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// Spread values beyond corev1's ScheduleAnyway and DoNotSchedule.
const (
	// SpreadNone sets no topology spread constraint.
	SpreadNone corev1.UnsatisfiableConstraintAction = "None"
)

// maxNameLen bounds the Job name: Indexed Job pods get the hostname
// "<job>-<index>", which must stay a 63-character DNS label.
const maxNameLen = 52

// SecretRef names one key of a Secret in the Job's namespace.
type SecretRef struct {
	Name string
	Key  string
}

// IsZero reports whether no Secret is named.
func (s SecretRef) IsZero() bool { return s.Name == "" }

// ParseSecretRef parses "name/key" or "name" (with defKey).
func ParseSecretRef(s, defKey string) (SecretRef, error) {
	if s == "" {
		return SecretRef{}, nil
	}
	name, key, ok := strings.Cut(s, "/")
	if !ok {
		key = defKey
	}
	if name == "" || key == "" {
		return SecretRef{}, fmt.Errorf("parse secret %q: want name/key", s)
	}
	return SecretRef{Name: name, Key: key}, nil
}

// Config describes the agents' Indexed Job. It is plain data read from
// flags; Validate reports every problem at once. A Config is not modified
// by this package and may be shared.
type Config struct {
	// Namespace holds the Job, the Secrets it reads and the Owner;
	// required.
	Namespace string
	// Name is the Job name prefix (default DefaultName); the Job is named
	// "<Name>-<RunID>", or Name when RunID is empty.
	Name string
	// RunID tells this run's Job apart; NewManager draws a random one
	// when empty.
	RunID string

	// Image is the fleetbench image; required. Its entrypoint must be the
	// fleetbench binary unless Command says otherwise.
	Image string
	// PullPolicy is the image pull policy (default: Kubernetes' own).
	PullPolicy corev1.PullPolicy
	// ImagePullSecrets names Secrets for a private registry.
	ImagePullSecrets []string
	// Command overrides the image entrypoint; Args are passed after it.
	Command []string
	// ServiceAccountName runs the agents as this ServiceAccount; its token
	// is never mounted (agents do not talk to the API server).
	ServiceAccountName string

	// Agents is the number of agent pods. When 0, it is derived:
	// ceil(MaxLevel / AgentCapacity).
	Agents int
	// AgentCapacity is the most sessions one agent runs (passed as
	// --capacity); 0 means no cap.
	AgentCapacity int
	// MaxLevel is the largest concurrency level of the run.
	MaxLevel int

	// Resources of the agent container.
	Resources corev1.ResourceRequirements
	// NodeSelector and Tolerations place the agents.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Spread spreads the agents over nodes (kubernetes.io/hostname,
	// maxSkew 1): corev1.ScheduleAnyway (the default), corev1.DoNotSchedule,
	// or SpreadNone.
	Spread corev1.UnsatisfiableConstraintAction
	// PortRange is the net.ipv4.ip_local_port_range sysctl ("low high",
	// default DefaultPortRange); "-" leaves the node's setting alone.
	// Ignored with HostNetwork: the host's namespace is the node's.
	PortRange string
	// HostNetwork runs the agents in the node's network namespace, for a
	// coordinator and target reachable on the node's loopback (a one-node
	// test cluster) or a CNI that limits pod throughput. Agents then share
	// the node's ephemeral ports.
	HostNetwork bool
	// MetricsPort is the port each agent serves its own health on
	// (`agent --metrics-listen :PORT`, /metrics), declared as the
	// container port MetricsPortName and in the prometheus.io/scrape and
	// prometheus.io/port pod annotations. 0: none. Ignored with
	// HostNetwork: two agents on one node would both want the node's
	// port.
	MetricsPort int

	// CoordinatorAddr is the coordinator Service's host:port; required.
	CoordinatorAddr string
	// Token is the Secret key holding the shared agent token. It is
	// mounted as TokenFile, or given as $FLEETBENCH_TOKEN with TokenAsEnv.
	// Empty: agents present no token.
	Token      SecretRef
	TokenAsEnv bool
	// APIKey is the Secret key holding the model server's API key, given
	// to agents as $APIKeyEnv (default DefaultAPIKeyEnv). Empty: none.
	APIKey    SecretRef
	APIKeyEnv string
	// Mounts are read-only volumes in every agent pod: datasets
	// (ShareGPT, JSONL) and docchat documents, at the path the workload
	// names.
	Mounts []Mount
	// Args are extra agent flags, after the ones Build sets.
	Args []string
	// Env is extra environment for the agent container.
	Env []corev1.EnvVar

	// Owner, when set, becomes the Job's owner reference, so the garbage
	// collector deletes the agents when the coordinator's Pod (or Job) is
	// deleted. It must live in Namespace. See OwnerFromEnv.
	Owner *metav1.OwnerReference
	// PendingTimeout bounds how long an agent pod may stay Pending
	// (default DefaultPendingTimeout).
	PendingTimeout time.Duration
	// BackoffLimitPerIndex is how often one index is replaced after a
	// failure (nil: DefaultBackoffLimitPerIndex).
	BackoffLimitPerIndex *int32
	// TTLAfterFinished deletes a finished Job nobody deleted (default
	// DefaultTTLAfterFinished; negative: never).
	TTLAfterFinished time.Duration
	// Labels are added to the Job and its pods; Annotations to its pods.
	// Neither may override the labels this package sets.
	Labels      map[string]string
	Annotations map[string]string
}

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.PortRange == "" {
		c.PortRange = DefaultPortRange
	}
	if c.PendingTimeout == 0 {
		c.PendingTimeout = DefaultPendingTimeout
	}
	if c.BackoffLimitPerIndex == nil {
		c.BackoffLimitPerIndex = new(int32(DefaultBackoffLimitPerIndex))
	}
	if c.TTLAfterFinished == 0 {
		c.TTLAfterFinished = DefaultTTLAfterFinished
	}
	if c.Spread == "" {
		c.Spread = corev1.ScheduleAnyway
	}
	if c.Token.Name != "" && c.Token.Key == "" {
		c.Token.Key = DefaultTokenKey
	}
	if c.APIKey.Name != "" && c.APIKey.Key == "" {
		c.APIKey.Key = DefaultAPIKeyKey
	}
	if c.APIKeyEnv == "" {
		c.APIKeyEnv = DefaultAPIKeyEnv
	}
	return c
}

// JobName returns the name of the Job Build makes.
func (c Config) JobName() string {
	c = c.withDefaults()
	if c.RunID == "" {
		return c.Name
	}
	return c.Name + "-" + c.RunID
}

// AgentCount returns the number of agent pods: Agents, or
// ceil(MaxLevel / AgentCapacity) when Agents is 0.
func (c Config) AgentCount() int {
	if c.Agents > 0 {
		return c.Agents
	}
	if c.AgentCapacity <= 0 || c.MaxLevel <= 0 {
		return 0
	}
	return (c.MaxLevel + c.AgentCapacity - 1) / c.AgentCapacity
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Namespace == "" {
		bad("namespace: required")
	} else if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		bad("namespace %q: %s", c.Namespace, strings.Join(msgs, "; "))
	}
	name := c.JobName()
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		bad("job name %q: %s", name, strings.Join(msgs, "; "))
	} else if len(name) > maxNameLen {
		bad("job name %q: at most %d characters, so pod hostnames stay DNS labels", name, maxNameLen)
	}
	if c.Image == "" {
		bad("image: required")
	}
	if c.CoordinatorAddr == "" {
		bad("coordinator address: required")
	} else if _, port, err := net.SplitHostPort(c.CoordinatorAddr); err != nil || port == "" {
		bad("coordinator address %q: want host:port", c.CoordinatorAddr)
	}
	switch {
	case c.Agents < 0:
		bad("agents %d: must be >= 0", c.Agents)
	case c.AgentCapacity < 0:
		bad("agent capacity %d: must be >= 0", c.AgentCapacity)
	case c.Agents == 0 && (c.AgentCapacity == 0 || c.MaxLevel <= 0):
		bad("agents: give a count, or an agent capacity and the largest level")
	case c.Agents > 0 && c.AgentCapacity > 0 && c.MaxLevel > 0 && c.Agents*c.AgentCapacity < c.MaxLevel:
		bad("agents %d x capacity %d < largest level %d: the agents cannot hold every session",
			c.Agents, c.AgentCapacity, c.MaxLevel)
	}
	switch c.Spread {
	case corev1.ScheduleAnyway, corev1.DoNotSchedule, SpreadNone:
	default:
		bad("spread %q: want %s, %s or %s", c.Spread, corev1.ScheduleAnyway, corev1.DoNotSchedule, SpreadNone)
	}
	if c.MetricsPort < 0 || c.MetricsPort > 65535 {
		bad("metrics port %d: want 1 to 65535, or 0 for none", c.MetricsPort)
	}
	if c.PortRange != "-" {
		if _, _, err := parsePortRange(c.PortRange); err != nil {
			errs = append(errs, err)
		}
	}
	for what, s := range map[string]SecretRef{"token secret": c.Token, "api key secret": c.APIKey} {
		if s.IsZero() {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
			bad("%s name %q: %s", what, s.Name, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsConfigMapKey(s.Key); len(msgs) > 0 {
			bad("%s key %q: %s", what, s.Key, strings.Join(msgs, "; "))
		}
	}
	for i, m := range c.Mounts {
		if err := m.validate(); err != nil {
			bad("mount %d: %v", i, err)
		}
		for _, o := range c.Mounts[:i] {
			if o.Path == m.Path {
				bad("mount %d: path %s is mounted twice", i, m.Path)
			}
		}
	}
	if c.PendingTimeout < 0 {
		bad("pending timeout %v: must be > 0", c.PendingTimeout)
	}
	if *c.BackoffLimitPerIndex < 0 {
		bad("backoff limit per index %d: must be >= 0", *c.BackoffLimitPerIndex)
	}
	if c.Owner != nil && (c.Owner.Name == "" || c.Owner.UID == "" || c.Owner.Kind == "" || c.Owner.APIVersion == "") {
		bad("owner: needs apiVersion, kind, name and uid")
	}
	for k, v := range c.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			bad("label %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			bad("label %s=%q: %s", k, v, strings.Join(msgs, "; "))
		}
		switch k {
		case LabelAgents, LabelRun, LabelName, LabelComponent, LabelManagedBy:
			bad("label %q: set by fleetbench", k)
		}
	}
	return errors.Join(errs...)
}

// parsePortRange parses "low high" (the sysctl's format).
func parsePortRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) == 2 {
		lo, err1 := strconv.Atoi(f[0])
		hi, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && lo >= 1 && lo < hi && hi <= 65535 {
			return lo, hi, nil
		}
	}
	return 0, 0, fmt.Errorf("port range %q: want \"low high\" with 1 <= low < high <= 65535", s)
}

// Downward API variables a coordinator pod sets so its agents' Job can be
// owned by it:
//
//	env:
//	  - name: POD_NAME
//	    valueFrom: {fieldRef: {fieldPath: metadata.name}}
//	  - name: POD_UID
//	    valueFrom: {fieldRef: {fieldPath: metadata.uid}}
const (
	EnvPodName = "POD_NAME"
	EnvPodUID  = "POD_UID"
)

// OwnerFromEnv returns an owner reference to the Pod this process runs in,
// from $POD_NAME and $POD_UID, or nil when either is unset (not in a pod,
// or the manifest does not pass them).
func OwnerFromEnv() *metav1.OwnerReference {
	return ownerFrom(os.Getenv)
}

func ownerFrom(getenv func(string) string) *metav1.OwnerReference {
	name, uid := getenv(EnvPodName), getenv(EnvPodUID)
	if name == "" || uid == "" {
		return nil
	}
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
}

// Kinds of Mount.
const (
	MountPVC       = "pvc"
	MountConfigMap = "configmap"
	MountSecret    = "secret"
)

// Mount is a volume mounted read-only in every agent pod.
type Mount struct {
	// Kind is MountPVC (a PersistentVolumeClaim, e.g. a ShareGPT file),
	// MountConfigMap or MountSecret (small files: documents).
	Kind string
	// Name is the claim's, ConfigMap's or Secret's name.
	Name string
	// Path is where it appears in the agent container; absolute.
	Path string
}

// ParseMount parses KIND:NAME:PATH, e.g. pvc:sharegpt:/data.
func ParseMount(s string) (Mount, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return Mount{}, fmt.Errorf("parse mount %q: want KIND:NAME:PATH with KIND pvc, configmap or secret", s)
	}
	m := Mount{Kind: parts[0], Name: parts[1], Path: parts[2]}
	if err := m.validate(); err != nil {
		return Mount{}, fmt.Errorf("parse mount %q: %w", s, err)
	}
	return m, nil
}

func (m Mount) validate() error {
	switch m.Kind {
	case MountPVC, MountConfigMap, MountSecret:
	default:
		return fmt.Errorf("kind %q: want %s, %s or %s", m.Kind, MountPVC, MountConfigMap, MountSecret)
	}
	if msgs := validation.IsDNS1123Subdomain(m.Name); len(msgs) > 0 {
		return fmt.Errorf("name %q: %s", m.Name, strings.Join(msgs, "; "))
	}
	clean := path.Clean(m.Path)
	switch {
	case !path.IsAbs(m.Path) || clean != m.Path:
		return fmt.Errorf("path %q: want a clean absolute path", m.Path)
	case clean == "/" || clean == "/tmp" || strings.HasPrefix(clean, "/tmp/") ||
		clean == TokenDir || strings.HasPrefix(TokenDir, clean+"/") || strings.HasPrefix(clean, TokenDir+"/"):
		return fmt.Errorf("path %q: clashes with the agent's own mounts (/tmp, %s)", m.Path, TokenDir)
	}
	return nil
}
