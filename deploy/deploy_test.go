// Package deploy_test renders every kustomization under deploy/ with the
// kustomize Go API (the same code `kubectl kustomize` runs) and checks the
// fields that matter, and validates every sweep file with pkg/sweep.
package deploy_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

// wantImage is the coordinator image the base sets.
const wantImage = "ghcr.io/fleetbench/fleetbench:latest"

// kustomizations returns the directories under deploy/ that hold a
// kustomization.yaml.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("found %d kustomizations (%v), want the base and four examples", len(dirs), dirs)
	}
	return dirs
}

// render runs kustomize build on dir.
func render(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

// object is a rendered resource as a plain map, read through get.
type object = map[string]any

func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// objects returns the rendered resources of kind, keyed by name.
func objects(t *testing.T, m resmap.ResMap, kind string) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, r := range m.Resources() {
		if r.GetKind() != kind {
			continue
		}
		mm, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetName()] = mm
	}
	return out
}

func one(t *testing.T, m resmap.ResMap, kind, name string) object {
	t.Helper()
	o, ok := objects(t, m, kind)[name]
	if !ok {
		t.Fatalf("no %s %s rendered", kind, name)
	}
	return o
}

func TestKustomizeRender(t *testing.T) {
	wantRules := `- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, get, list, watch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete]
- apiGroups: [nvidia.com]
  resources: [dynamographdeployments]
  verbs: [get, patch]
- apiGroups: [kubeai.org]
  resources: [models]
  verbs: [get, patch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, patch]
`
	var want any
	if err := yaml.Unmarshal([]byte(wantRules), &want); err != nil {
		t.Fatal(err)
	}
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			m := render(t, dir)

			role := one(t, m, "Role", "fleetbench-coordinator")
			if got := role["rules"]; !equalJSON(t, got, want) {
				t.Errorf("Role rules = %v, want %v", got, want)
			}
			ns := get(role, "metadata", "namespace")
			rb := one(t, m, "RoleBinding", "fleetbench-coordinator")
			if got := get(rb, "subjects", 0, "namespace"); got != ns {
				t.Errorf("RoleBinding subject namespace = %v, want the Role's %v", got, ns)
			}
			if got := get(rb, "subjects", 0, "name"); got != "fleetbench-coordinator" {
				t.Errorf("RoleBinding subject = %v", got)
			}
			one(t, m, "ServiceAccount", "fleetbench-coordinator")
			if s := objects(t, m, "Secret"); len(s) > 0 {
				t.Errorf("secrets rendered: %v; secret values must not be committed", s)
			}

			job := one(t, m, "Job", "fleetbench-coordinator")
			pod := get(job, "spec", "template", "spec")
			c := get(pod, "containers", 0)
			if got := get(c, "image"); got != wantImage {
				t.Errorf("Job image = %v, want %s", got, wantImage)
			}
			if got := get(pod, "serviceAccountName"); got != "fleetbench-coordinator" {
				t.Errorf("Job serviceAccountName = %v", got)
			}
			if got := get(pod, "securityContext", "runAsNonRoot"); got != true {
				t.Errorf("Job runAsNonRoot = %v", got)
			}
			refs, fields := map[string]any{}, map[string]any{}
			for _, e := range get(c, "env").([]any) {
				name := get(e, "name").(string)
				refs[name] = get(e, "valueFrom", "secretKeyRef", "name")
				fields[name] = get(e, "valueFrom", "fieldRef", "fieldPath")
				if get(e, "value") != nil {
					t.Errorf("env %v has a literal value; secrets come from secretKeyRef", name)
				}
			}
			if refs["OPENAI_API_KEY"] != "fleetbench-model-api-key" {
				t.Errorf("Job secret refs = %v", refs)
			}
			// The downward API gives the agents' Job its owner (this pod),
			// its image and namespace.
			for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_UID": "metadata.uid", "POD_NAMESPACE": "metadata.namespace"} {
				if fields[name] != path {
					t.Errorf("env %s from %v, want the downward API's %s", name, fields[name], path)
				}
			}
			args := toStrings(get(c, "args"))
			flag := func(name string) string {
				if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
					return args[i+1]
				}
				return ""
			}
			if len(args) < 3 || args[0] != "sweep" || flag("-f") != "/etc/fleetbench/sweep.yaml" || !slices.Contains(args, "--kube-agents") {
				t.Errorf("Job args %q, want sweep -f /etc/fleetbench/sweep.yaml --kube-agents", args)
			}
			// The token file is the Secret's key, mounted read-only; the
			// agents read the same Secret.
			mounts := map[any]any{}
			for _, vm := range get(c, "volumeMounts").([]any) {
				mounts[get(vm, "name")] = get(vm, "mountPath")
			}
			var tokenVol any
			for _, v := range get(pod, "volumes").([]any) {
				if get(v, "secret", "secretName") == "fleetbench-agent-token" {
					tokenVol = v
				}
			}
			if tokenVol == nil || get(tokenVol, "secret", "items", 0, "key") != "token" ||
				fmt.Sprint(mounts[get(tokenVol, "name")], "/", get(tokenVol, "secret", "items", 0, "path")) != flag("--token-file") {
				t.Errorf("token volume %v mounted at %v; want the Secret's token at --token-file %s", tokenVol, mounts, flag("--token-file"))
			}
			if got := flag("--token-secret"); got != "fleetbench-agent-token/token" {
				t.Errorf("--token-secret %q, want fleetbench-agent-token/token", got)
			}
			if refs["FLEETBENCH_TOKEN"] != nil {
				t.Error("the token is both a file and $FLEETBENCH_TOKEN; the file wins, drop the env")
			}
			containerPorts := map[any]any{}
			for _, p := range get(c, "ports").([]any) {
				containerPorts[get(p, "name")] = get(p, "containerPort")
			}

			// The ConfigMap holds this directory's sweep file, and the Job
			// mounts it under its hashed name.
			sweepFile, err := os.ReadFile(filepath.Join(dir, "sweep.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			cms := objects(t, m, "ConfigMap")
			if len(cms) != 1 {
				t.Fatalf("ConfigMaps = %d, want 1", len(cms))
			}
			for name, cm := range cms {
				if !strings.HasPrefix(name, "fleetbench-sweep-") {
					t.Errorf("ConfigMap name %s lacks the generator's hash suffix", name)
				}
				if got := get(cm, "data", "sweep.yaml"); got != string(sweepFile) {
					t.Errorf("ConfigMap sweep.yaml is not %s/sweep.yaml:\n%v", dir, got)
				}
				if got := get(pod, "volumes", 0, "configMap", "name"); got != name {
					t.Errorf("Job mounts ConfigMap %v, want %s", got, name)
				}
			}

			svc := one(t, m, "Service", "fleetbench-coordinator")
			ports := map[any]any{}
			for _, p := range get(svc, "spec", "ports").([]any) {
				ports[get(p, "name")] = get(p, "port")
			}
			if ports["grpc"] == nil || ports["metrics"] == nil {
				t.Errorf("Service ports = %v, want grpc and metrics", ports)
			}
			// What the coordinator listens on is what the Service targets,
			// the agents dial and Prometheus scrapes.
			for name, fl := range map[string]string{"grpc": "--listen", "metrics": "--metrics-listen"} {
				if want := fmt.Sprint(":", containerPorts[name]); flag(fl) != want {
					t.Errorf("%s %q, want %s (the %s container port)", fl, flag(fl), want, name)
				}
			}
			if want := fmt.Sprint("fleetbench-coordinator:", ports["grpc"]); flag("--coordinator-service") != want {
				t.Errorf("--coordinator-service %q, want %s", flag("--coordinator-service"), want)
			}
			sm := one(t, m, "ServiceMonitor", "fleetbench-coordinator")
			if got := get(sm, "apiVersion"); got != "monitoring.coreos.com/v1" {
				t.Errorf("ServiceMonitor apiVersion = %v", got)
			}
			if got := get(sm, "spec", "endpoints", 0, "port"); got != "metrics" {
				t.Errorf("ServiceMonitor port = %v", got)
			}
			if got := get(sm, "spec", "endpoints", 0, "path"); got != "/metrics" {
				t.Errorf("ServiceMonitor path = %v, want /metrics (what --metrics-listen serves)", got)
			}
			// The agents' PodMonitor selects the pods of the agents' Job
			// (kubejob.Build) by their labels and scrapes the port the Job
			// declares, unless the coordinator turns it off.
			pm := one(t, m, "PodMonitor", "fleetbench-agents")
			agentPod := kubejob.Build(kubejob.Config{Namespace: "x", Image: "i", Agents: 1, CoordinatorAddr: "c:1",
				MetricsPort: kubejob.DefaultAgentMetricsPort}).Spec.Template
			sel, _ := get(pm, "spec", "selector", "matchLabels").(map[string]any)
			if len(sel) == 0 {
				t.Errorf("PodMonitor selects every pod: %v", get(pm, "spec", "selector"))
			}
			for k, v := range sel {
				if agentPod.Labels[k] != v {
					t.Errorf("PodMonitor selects %s=%v; the agent pods have %q", k, v, agentPod.Labels[k])
				}
			}
			if get(pm, "spec", "selector", "matchLabels", kubejob.LabelComponent) != "agent" {
				t.Errorf("PodMonitor selector %v: want the agents only (component agent)", sel)
			}
			if got := get(pm, "spec", "podMetricsEndpoints", 0, "port"); got != kubejob.MetricsPortName || agentPod.Spec.Containers[0].Ports[0].Name != got {
				t.Errorf("PodMonitor port = %v, want the agent container's %q", got, kubejob.MetricsPortName)
			}
			if got := get(pm, "spec", "podMetricsEndpoints", 0, "path"); got != "/metrics" {
				t.Errorf("PodMonitor path = %v, want /metrics", got)
			}
			if flag("--agent-metrics-port") == "0" {
				t.Error("the coordinator turns the agents' metrics off, yet the PodMonitor scrapes them")
			}
		})
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// TestExamples checks what each example promises in its name.
func TestExamples(t *testing.T) {
	t.Run("dynamo 4 x TP=2 70B FP8 with an 8B draft", func(t *testing.T) {
		m := render(t, "examples/dynamo-70b-spec-decode")
		dgd := one(t, m, "DynamoGraphDeployment", "llama-70b-spec")
		w := get(dgd, "spec", "services", "VllmDecodeWorker")
		if get(w, "replicas") != 4 || get(w, "resources", "limits", "gpu") != "2" {
			t.Errorf("worker replicas %v gpus %v, want 4 x 2", get(w, "replicas"), get(w, "resources", "limits", "gpu"))
		}
		args := strings.Join(toStrings(get(w, "extraPodSpec", "mainContainer", "args")), " ")
		for _, s := range []string{"70B-Instruct-FP8", "--tensor-parallel-size 2", "--speculative-config", "8B-Instruct"} {
			if !strings.Contains(args, s) {
				t.Errorf("worker args lack %q: %s", s, args)
			}
		}
		if get(dgd, "spec", "services", "Frontend", "envs", 0, "name") != "DYN_ROUTER_MODE" {
			t.Error("Frontend does not set DYN_ROUTER_MODE")
		}
	})
	t.Run("dynamo 3 x H200 70B FP8", func(t *testing.T) {
		m := render(t, "examples/dynamo-70b-h200")
		w := get(one(t, m, "DynamoGraphDeployment", "llama-70b-h200"), "spec", "services", "VllmDecodeWorker")
		if get(w, "replicas") != 3 || get(w, "resources", "limits", "gpu") != "1" {
			t.Errorf("worker replicas %v gpus %v, want 3 x 1", get(w, "replicas"), get(w, "resources", "limits", "gpu"))
		}
		if got := get(w, "extraPodSpec", "nodeSelector", "nvidia.com/gpu.product"); got != "NVIDIA-H200" {
			t.Errorf("worker node selector = %v", got)
		}
	})
	t.Run("kubeai 8 x 8B FP8 on L4", func(t *testing.T) {
		m := render(t, "examples/kubeai-8b-l4")
		model := one(t, m, "Model", "llama-3.1-8b-instruct-fp8-l4")
		if get(model, "spec", "replicas") != 8 || get(model, "spec", "resourceProfile") != "nvidia-gpu-l4:1" {
			t.Errorf("model replicas %v profile %v", get(model, "spec", "replicas"), get(model, "spec", "resourceProfile"))
		}
		s, err := sweep.Load("examples/kubeai-8b-l4/sweep.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Levels, []int{1600, 3200, 8000}) || s.Workload.Kind != "sharegpt" {
			t.Errorf("levels %v workload %s, want the 1,600/3,200/8,000-session ShareGPT sweep", s.Levels, s.Workload.Kind)
		}
		job := one(t, m, "Job", "fleetbench-coordinator")
		mounts := toStrings(mapField(get(job, "spec", "template", "spec", "containers", 0, "volumeMounts"), "mountPath"))
		if !slices.Contains(mounts, "/data") {
			t.Errorf("Job mounts %v, want the dataset at /data", mounts)
		}
		args := toStrings(get(job, "spec", "template", "spec", "containers", 0, "args"))
		if i := slices.Index(args, "--agent-mount"); i < 0 || i+1 == len(args) || args[i+1] != "pvc:sharegpt:/data" {
			t.Errorf("coordinator args %v, want --agent-mount pvc:sharegpt:/data for the agents", args)
		}
	})
	t.Run("vllm probes use /v1/models", func(t *testing.T) {
		m := render(t, "examples/vllm")
		c := get(one(t, m, "Deployment", "vllm"), "spec", "template", "spec", "containers", 0)
		for _, probe := range []string{"startupProbe", "readinessProbe"} {
			if got := get(c, probe, "httpGet", "path"); got != "/v1/models" {
				t.Errorf("%s path = %v, want /v1/models", probe, got)
			}
		}
	})
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func mapField(v any, field string) any {
	l, _ := v.([]any)
	out := make([]any, 0, len(l))
	for _, e := range l {
		out = append(out, get(e, field))
	}
	return out
}

// TestSweepFiles loads and validates every deploy/**/sweep*.yaml with the
// switch kinds main registers.
func TestSweepFiles(t *testing.T) {
	kubeswitch.Register()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ok, _ := filepath.Match("sweep*.yaml", d.Name()); ok && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d sweep files (%v), want the base's and four examples'", len(files), files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			s, err := sweep.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("validate %s: %v", f, err)
			}
		})
	}
}
