package kubejob

import (
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Environment variables Build sets in the agent container. The agent's
// flags refer to them as $(NAME), which the kubelet expands.
const (
	EnvIndex = "JOB_COMPLETION_INDEX"
	EnvToken = "FLEETBENCH_TOKEN"
)

// Build returns the agents' Indexed Job for cfg, which must be valid (see
// Validate). It is a pure function of cfg.
//
// Each pod runs `fleetbench agent --coordinator ADDR --id $(POD_NAME)
// --index $(JOB_COMPLETION_INDEX) [--token-file F] [--capacity N]
// [--metrics-listen :PORT] ARGS`,
// the index coming from the Job controller's completion-index annotation
// through the downward API.
func Build(cfg Config) *batchv1.Job {
	cfg = cfg.withDefaults()
	name := cfg.JobName()
	n := int32(cfg.AgentCount())

	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelName] = "fleetbench"
	labels[LabelComponent] = "agent"
	labels[LabelManagedBy] = "fleetbench-coordinator"
	labels[LabelAgents] = name
	if cfg.RunID != "" {
		labels[LabelRun] = cfg.RunID
	}
	selector := map[string]string{LabelAgents: name}

	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: cfg.Namespace,
			Labels:    labels,
		},
		Spec: batchv1.JobSpec{
			CompletionMode: new(batchv1.IndexedCompletion),
			Completions:    new(n),
			Parallelism:    new(n),
			// A failed agent is replaced only once its pod has fully
			// terminated, so two pods never hold one index at once.
			PodReplacementPolicy: new(batchv1.Failed),
			BackoffLimitPerIndex: new(*cfg.BackoffLimitPerIndex),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// A usage error fails the same way on every retry.
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: new(ContainerName),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{ExitUsage},
					},
				},
				{
					// Evictions and preemptions are not the agent's fault:
					// replace the pod without using up the index's retries.
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      maps.Clone(labels),
					Annotations: podAnnotations(cfg),
				},
				Spec: podSpec(cfg, selector),
			},
		},
	}
	if cfg.TTLAfterFinished > 0 {
		job.Spec.TTLSecondsAfterFinished = new(int32(cfg.TTLAfterFinished.Seconds()))
	}
	if cfg.Owner != nil {
		job.OwnerReferences = []metav1.OwnerReference{*cfg.Owner}
	}
	return job
}

func podSpec(cfg Config, selector map[string]string) corev1.PodSpec {
	spec := corev1.PodSpec{
		// Never: each failure is a new pod the Job counts against the
		// index's backoff, and the watcher sees it as an agent loss.
		RestartPolicy:                 corev1.RestartPolicyNever,
		ServiceAccountName:            cfg.ServiceAccountName,
		AutomountServiceAccountToken:  new(false),
		EnableServiceLinks:            new(false),
		NodeSelector:                  maps.Clone(cfg.NodeSelector),
		Tolerations:                   slices.Clone(cfg.Tolerations),
		TerminationGracePeriodSeconds: new(int64(30)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: new(true),
			RunAsUser:    new(int64(65532)),
			RunAsGroup:   new(int64(65532)),
			// The token file is mode 0440, readable through its group.
			FSGroup:        new(int64(65532)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{container(cfg)},
		Volumes: []corev1.Volume{{
			Name:         "tmp",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		}},
	}
	if cfg.HostNetwork {
		// A namespaced sysctl is refused in the host's namespace.
		spec.HostNetwork = true
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	} else if cfg.PortRange != "-" {
		// ip_local_port_range is a namespaced, safe sysctl: allowed by the
		// kubelet and the baseline Pod Security level without opt-in.
		spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: cfg.PortRange}}
	}
	for _, s := range cfg.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if cfg.Spread != SpreadNone {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: cfg.Spread,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
		}}
	}
	for i, m := range cfg.Mounts {
		var src corev1.VolumeSource
		switch m.Kind {
		case MountPVC:
			src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Name, ReadOnly: true}
		case MountConfigMap:
			src.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: m.Name}}
		case MountSecret:
			src.Secret = &corev1.SecretVolumeSource{SecretName: m.Name, DefaultMode: new(int32(0o440))}
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: mountVolume(i), VolumeSource: src})
	}
	if !cfg.Token.IsZero() && !cfg.TokenAsEnv {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: "token",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  cfg.Token.Name,
				Items:       []corev1.KeyToPath{{Key: cfg.Token.Key, Path: "token"}},
				DefaultMode: new(int32(0o440)),
			}},
		})
	}
	return spec
}

// Pod annotations of annotation-based Prometheus scraping (the
// kubernetes-pods job of Prometheus's example configuration); the
// Prometheus Operator reads the PodMonitor instead.
const (
	AnnotationScrape = "prometheus.io/scrape"
	AnnotationPort   = "prometheus.io/port"
	AnnotationPath   = "prometheus.io/path"
)

// metricsPort is the port the agents serve /metrics on, 0 for none.
func (c Config) metricsPort() int {
	if c.HostNetwork {
		return 0
	}
	return c.MetricsPort
}

// podAnnotations are cfg's pod annotations, with the scrape annotations
// when the agents serve metrics (cfg's own win).
func podAnnotations(cfg Config) map[string]string {
	a := maps.Clone(cfg.Annotations)
	port := cfg.metricsPort()
	if port == 0 {
		return a
	}
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range map[string]string{AnnotationScrape: "true", AnnotationPort: strconv.Itoa(port), AnnotationPath: "/metrics"} {
		if _, ok := a[k]; !ok {
			a[k] = v
		}
	}
	return a
}

// mountVolume names the volume of Config.Mounts[i].
func mountVolume(i int) string { return "data-" + strconv.Itoa(i) }

func container(cfg Config) corev1.Container {
	args := []string{"agent",
		"--coordinator", cfg.CoordinatorAddr,
		"--id", "$(" + EnvPodName + ")",
		"--index", "$(" + EnvIndex + ")",
	}
	env := []corev1.EnvVar{
		{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		// The Job controller sets this variable too; setting it here makes
		// the Job self-describing and the --index flag independent of it.
		{Name: EnvIndex, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + batchv1.JobCompletionIndexAnnotation + "']",
		}}},
		{Name: "FLEETBENCH_LOG_FORMAT", Value: "json"},
	}
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	for i, m := range cfg.Mounts {
		mounts = append(mounts, corev1.VolumeMount{Name: mountVolume(i), MountPath: m.Path, ReadOnly: true})
	}
	if !cfg.Token.IsZero() {
		if cfg.TokenAsEnv {
			env = append(env, secretEnv(EnvToken, cfg.Token))
		} else {
			args = append(args, "--token-file", TokenFile)
			mounts = append(mounts, corev1.VolumeMount{Name: "token", MountPath: TokenDir, ReadOnly: true})
		}
	}
	if !cfg.APIKey.IsZero() {
		env = append(env, secretEnv(cfg.APIKeyEnv, cfg.APIKey))
		if cfg.APIKeyEnv != DefaultAPIKeyEnv {
			args = append(args, "--api-key-env", cfg.APIKeyEnv)
		}
	}
	if cfg.AgentCapacity > 0 {
		args = append(args, "--capacity", strconv.Itoa(cfg.AgentCapacity))
	}
	var ports []corev1.ContainerPort
	if port := cfg.metricsPort(); port > 0 {
		args = append(args, "--metrics-listen", ":"+strconv.Itoa(port))
		ports = []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}}
	}
	args = append(args, cfg.Args...)
	env = append(env, cfg.Env...)
	return corev1.Container{
		Name:            ContainerName,
		Image:           cfg.Image,
		ImagePullPolicy: cfg.PullPolicy,
		Command:         slices.Clone(cfg.Command),
		Args:            args,
		Ports:           ports,
		Env:             env,
		Resources:       *cfg.Resources.DeepCopy(),
		VolumeMounts:    mounts,
		// A crashing agent's last log lines become the Failed event's
		// message.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			ReadOnlyRootFilesystem:   new(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

func secretEnv(name string, s SecretRef) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
		Key:                  s.Key,
	}}}
}
