package kubejob

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fullConfig sets every field, so the golden file shows them all.
func fullConfig() Config {
	return Config{
		Namespace:        "bench",
		RunID:            "x7k2p",
		Image:            "ghcr.io/fleetbench/fleetbench:v1.2.3",
		PullPolicy:       corev1.PullIfNotPresent,
		ImagePullSecrets: []string{"regcred"},
		AgentCapacity:    64,
		MaxLevel:         200,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		NodeSelector:    map[string]string{"pool": "load"},
		Tolerations:     []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "load", Effect: corev1.TaintEffectNoSchedule}},
		Spread:          corev1.DoNotSchedule,
		MetricsPort:     9091,
		CoordinatorAddr: "fleetbench-coordinator.bench.svc:7070",
		Token:           SecretRef{Name: "fleetbench-agent-token"},
		APIKey:          SecretRef{Name: "fleetbench-model-api-key", Key: "key"},
		Args:            []string{"--endpoint", "chat"},
		Env:             []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "2"}},
		Owner:           &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "coordinator-abcde", UID: "0b7c9e4a-1111-2222-3333-444455556666"},
		Labels:          map[string]string{"team": "inference"},
		Annotations:     map[string]string{"prometheus.io/scrape": "false"},
	}
}

func TestBuildGolden(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"full", fullConfig()},
		{"minimal", Config{Namespace: "bench", Image: "fleetbench:dev", Agents: 2, CoordinatorAddr: "coord:7070"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			got, err := yaml.Marshal(Build(tt.cfg))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.name+".golden.yaml")
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("Build(%s) differs from %s (run with -update after checking):\n%s", tt.name, path, got)
			}
		})
	}
}

// TestBuildShape checks the fields the issue asks for one by one, so a
// golden file refreshed carelessly cannot hide a regression.
func TestBuildShape(t *testing.T) {
	job := Build(fullConfig())
	spec := job.Spec
	pod := spec.Template.Spec
	c := pod.Containers[0]

	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: wrong", what)
		}
	}
	check("name", job.Name == "fleetbench-agents-x7k2p")
	check("completion mode Indexed", *spec.CompletionMode == batchv1.IndexedCompletion)
	check("completions = parallelism = ceil(200/64) = 4", *spec.Completions == 4 && *spec.Parallelism == 4)
	check("pod replacement policy Failed", *spec.PodReplacementPolicy == batchv1.Failed)
	check("backoff limit per index", *spec.BackoffLimitPerIndex == DefaultBackoffLimitPerIndex)
	check("no global backoff limit", spec.BackoffLimit == nil)
	check("restart policy Never", pod.RestartPolicy == corev1.RestartPolicyNever)
	check("owner", len(job.OwnerReferences) == 1 && job.OwnerReferences[0].Name == "coordinator-abcde")
	check("pod labels select the pods", spec.Template.Labels[LabelAgents] == job.Name && spec.Template.Labels["team"] == "inference")
	check("sysctl", len(pod.SecurityContext.Sysctls) == 1 &&
		pod.SecurityContext.Sysctls[0] == corev1.Sysctl{Name: "net.ipv4.ip_local_port_range", Value: DefaultPortRange})
	check("spread", len(pod.TopologySpreadConstraints) == 1 &&
		pod.TopologySpreadConstraints[0].TopologyKey == corev1.LabelHostname &&
		pod.TopologySpreadConstraints[0].MaxSkew == 1 &&
		pod.TopologySpreadConstraints[0].WhenUnsatisfiable == corev1.DoNotSchedule &&
		pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels[LabelAgents] == job.Name)
	check("node selector", pod.NodeSelector["pool"] == "load")
	check("tolerations", len(pod.Tolerations) == 1 && pod.Tolerations[0].Key == "dedicated")
	check("pull secrets", len(pod.ImagePullSecrets) == 1 && pod.ImagePullSecrets[0].Name == "regcred")
	check("no service account token", !*pod.AutomountServiceAccountToken)
	check("image", c.Image == fullConfig().Image && c.ImagePullPolicy == corev1.PullIfNotPresent)
	check("resources", c.Resources.Requests.Cpu().String() == "2" && c.Resources.Limits.Memory().String() == "1Gi")

	wantArgs := []string{"agent", "--coordinator", "fleetbench-coordinator.bench.svc:7070",
		"--id", "$(POD_NAME)", "--index", "$(JOB_COMPLETION_INDEX)",
		"--token-file", TokenFile, "--capacity", "64", "--metrics-listen", ":9091", "--endpoint", "chat"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args\n got %q\nwant %q", c.Args, wantArgs)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	check("index from the completion-index annotation",
		env[EnvIndex].ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']")
	check("pod name from the downward API", env[EnvPodName].ValueFrom.FieldRef.FieldPath == "metadata.name")
	check("api key from its secret", env[DefaultAPIKeyEnv].ValueFrom.SecretKeyRef.Name == "fleetbench-model-api-key" &&
		env[DefaultAPIKeyEnv].ValueFrom.SecretKeyRef.Key == "key")
	check("extra env", env["GOMAXPROCS"].Value == "2")
	var tokenVol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "token" {
			tokenVol = &pod.Volumes[i]
		}
	}
	check("token secret volume", tokenVol != nil && tokenVol.Secret.SecretName == "fleetbench-agent-token" &&
		tokenVol.Secret.Items[0].Key == DefaultTokenKey)
	check("token mounted", slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == TokenDir }))
}

func TestBuildVariants(t *testing.T) {
	base := Config{Namespace: "bench", Image: "fleetbench:dev", Agents: 3, CoordinatorAddr: "coord:7070"}
	tests := []struct {
		name  string
		mod   func(*Config)
		check func(*testing.T, *batchv1.Job)
	}{
		{"token as env", func(c *Config) { c.Token, c.TokenAsEnv = SecretRef{Name: "tok", Key: "t"}, true }, func(t *testing.T, j *batchv1.Job) {
			c := j.Spec.Template.Spec.Containers[0]
			if slices.Contains(c.Args, "--token-file") {
				t.Errorf("args %q: --token-file with the token in the environment", c.Args)
			}
			found := false
			for _, e := range c.Env {
				found = found || (e.Name == EnvToken && e.ValueFrom.SecretKeyRef.Name == "tok" && e.ValueFrom.SecretKeyRef.Key == "t")
			}
			if !found {
				t.Errorf("env %v: no %s from secret tok/t", c.Env, EnvToken)
			}
		}},
		{"no token", func(*Config) {}, func(t *testing.T, j *batchv1.Job) {
			if a := j.Spec.Template.Spec.Containers[0].Args; slices.Contains(a, "--token-file") {
				t.Errorf("args %q: --token-file without a token secret", a)
			}
		}},
		{"no spread", func(c *Config) { c.Spread = SpreadNone }, func(t *testing.T, j *batchv1.Job) {
			if n := len(j.Spec.Template.Spec.TopologySpreadConstraints); n != 0 {
				t.Errorf("%d spread constraints, want none", n)
			}
		}},
		{"default spread", func(*Config) {}, func(t *testing.T, j *batchv1.Job) {
			tsc := j.Spec.Template.Spec.TopologySpreadConstraints
			if len(tsc) != 1 || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
				t.Errorf("spread %+v, want one ScheduleAnyway constraint", tsc)
			}
		}},
		{"node's port range", func(c *Config) { c.PortRange = "-" }, func(t *testing.T, j *batchv1.Job) {
			if s := j.Spec.Template.Spec.SecurityContext.Sysctls; len(s) != 0 {
				t.Errorf("sysctls %v, want none", s)
			}
		}},
		{"host network", func(c *Config) { c.HostNetwork = true }, func(t *testing.T, j *batchv1.Job) {
			spec := j.Spec.Template.Spec
			if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("hostNetwork %t, dnsPolicy %q; want true, ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
			}
			if s := spec.SecurityContext.Sysctls; len(s) != 0 {
				t.Errorf("sysctls %v with host network, want none (the kubelet refuses them)", s)
			}
		}},
		{"host network: no metrics port", func(c *Config) { c.HostNetwork, c.MetricsPort = true, 9091 }, func(t *testing.T, j *batchv1.Job) {
			c := j.Spec.Template.Spec.Containers[0]
			if slices.Contains(c.Args, "--metrics-listen") || len(c.Ports) != 0 || j.Spec.Template.Annotations[AnnotationScrape] != "" {
				t.Errorf("args %q ports %v annotations %v: two agents on a node would want one host port", c.Args, c.Ports, j.Spec.Template.Annotations)
			}
		}},
		{"user annotations win", func(c *Config) {
			c.MetricsPort, c.Annotations = 9091, map[string]string{AnnotationScrape: "false"}
		}, func(t *testing.T, j *batchv1.Job) {
			a := j.Spec.Template.Annotations
			if a[AnnotationScrape] != "false" || a[AnnotationPort] != "9091" {
				t.Errorf("annotations %v, want the config's scrape=false kept and the port added", a)
			}
		}},
		{"backoff 0 and no TTL", func(c *Config) { c.BackoffLimitPerIndex, c.TTLAfterFinished = new(int32(0)), -1 }, func(t *testing.T, j *batchv1.Job) {
			if *j.Spec.BackoffLimitPerIndex != 0 || j.Spec.TTLSecondsAfterFinished != nil {
				t.Errorf("backoff per index %d, ttl %v; want 0, nil", *j.Spec.BackoffLimitPerIndex, j.Spec.TTLSecondsAfterFinished)
			}
		}},
		{"mounts", func(c *Config) {
			c.Mounts = []Mount{{Kind: MountPVC, Name: "sharegpt", Path: "/data"}, {Kind: MountConfigMap, Name: "docs", Path: "/docs"}}
		}, func(t *testing.T, j *batchv1.Job) {
			spec := j.Spec.Template.Spec
			vols := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				vols[v.Name] = v
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range spec.Containers[0].VolumeMounts {
				mounts[m.MountPath] = m
			}
			d, ok := mounts["/data"]
			if pvc := vols[d.Name].PersistentVolumeClaim; !ok || !d.ReadOnly || pvc == nil || pvc.ClaimName != "sharegpt" || !pvc.ReadOnly {
				t.Errorf("/data: mount %+v volume %+v, want the sharegpt claim read-only", d, vols[d.Name])
			}
			if m, ok := mounts["/docs"]; !ok || !m.ReadOnly || vols[m.Name].ConfigMap == nil || vols[m.Name].ConfigMap.Name != "docs" {
				t.Errorf("/docs: mount %+v volume %+v, want ConfigMap docs read-only", m, vols[m.Name])
			}
		}},
		{"custom api key env", func(c *Config) { c.APIKey, c.APIKeyEnv = SecretRef{Name: "k"}, "VLLM_KEY" }, func(t *testing.T, j *batchv1.Job) {
			a := strings.Join(j.Spec.Template.Spec.Containers[0].Args, " ")
			if !strings.Contains(a, "--api-key-env VLLM_KEY") {
				t.Errorf("args %q: no --api-key-env VLLM_KEY", a)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mod(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			tt.check(t, Build(cfg))
		})
	}
}

func TestBuildDoesNotAlias(t *testing.T) {
	cfg := fullConfig()
	job := Build(cfg)
	job.Spec.Template.Spec.NodeSelector["pool"] = "changed"
	job.Spec.Template.Labels["team"] = "changed"
	job.Spec.Template.Spec.Containers[0].Args[0] = "changed"
	if cfg.NodeSelector["pool"] != "load" || cfg.Labels["team"] != "inference" || cfg.Args[0] != "--endpoint" {
		t.Error("Build's Job shares maps or slices with its Config")
	}
}
