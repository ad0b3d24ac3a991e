//go:build e2e

package main

// End-to-end tests on the test environment's real node (a kubelet running
// pods through containerd; scripts/kube-env.sh with
// FLEETBENCH_KUBE_REAL_NODE=1): fleetbench's image, its deploy/ manifests
// and its agents as real pods, as deploy/README.md tells a user to run
// them. `make e2e` runs only these; `make test` runs them with the rest.
//
// Every pod here uses the node's network (hostNetwork): the environment has
// no kube-proxy and no cluster DNS, and the coordinator, the simulator and
// the API server are reached on this machine's own addresses, so no test
// traffic leaves it.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// e2ePorts are the host ports of one end-to-end sweep.
type e2ePorts struct{ sim, grpc, metrics int }

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// renderSimExample renders deploy/examples/sim through an overlay that
// does what a user of a one-node cluster without kube-proxy would: the
// locally loaded image, the real node's taint and selector, host network
// with free ports, the API server's address for the coordinator (no
// kube-proxy serves the kubernetes Service), small CPU requests (the node
// has the machine's cores), the sweep shortened, and --linger so `fleetbench
// fetch` can take the results.
func renderSimExample(t *testing.T, ns string, node kubetest.RealNode, apiServer string, p e2ePorts, levels string) []*unstructured.Unstructured {
	t.Helper()
	api, err := url.Parse(apiServer)
	if err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs("deploy/examples/sim")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, example)
	if err != nil {
		t.Fatal(err)
	}
	sweepFile, err := os.ReadFile(filepath.Join(example, "sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sw map[string]any
	if err := yaml.Unmarshal(sweepFile, &sw); err != nil {
		t.Fatal(err)
	}
	simAddr := net.JoinHostPort(node.IP, strconv.Itoa(p.sim))
	sw["target"] = "http://" + simAddr + "/v1"
	var lv []int
	if err := yaml.Unmarshal([]byte(levels), &lv); err != nil {
		t.Fatal(err)
	}
	sw["levels"], sw["warmup"], sw["measure"], sw["cooldown"] = lv, "5s", "20s", "2s"
	b, err := yaml.Marshal(sw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	image, tag, _ := strings.Cut(node.Image, ":")
	grpc := "127.0.0.1:" + strconv.Itoa(p.grpc)
	args := []string{"sweep", "-f", "/etc/fleetbench/sweep.yaml", "--kube-agents",
		"--listen", grpc, "--metrics-listen", "$(POD_IP):" + strconv.Itoa(p.metrics),
		"--token-file", "/var/run/fleetbench/token/token", "--token-secret", "fleetbench-agent-token/token",
		"--coordinator-service", grpc, "--agent-host-network",
		"--node-selector", kubetest.RealNodeLabel + "=true", "--toleration", kubetest.RealNodeLabel + ":NoSchedule",
		"--agent-pull-policy", "IfNotPresent", "--agent-cpu", "300m", "--agent-memory", "1Gi", "--linger", "10m",
		// The node is this 2-core machine, shared with the simulator and
		// the control plane: the test checks what happens, not latency.
		"--agent-overcommit"}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	placement := fmt.Sprintf(`
      - {op: add, path: /spec/template/spec/hostNetwork, value: true}
      - {op: add, path: /spec/template/spec/nodeSelector, value: {%s: "true"}}
      - {op: add, path: /spec/template/spec/tolerations, value: [{key: %s, operator: Exists, effect: NoSchedule}]}
      - {op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: IfNotPresent}`, kubetest.RealNodeLabel, kubetest.RealNodeLabel)
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - %s
configMapGenerator:
  - name: fleetbench-sweep
    behavior: replace
    files: [sweep.yaml]
images:
  - name: ghcr.io/fleetbench/fleetbench
    newName: %s
    newTag: %q
patches:
  - target: {kind: Deployment, name: fleetbench-sim}
    patch: |%s
      - {op: replace, path: /spec/template/spec/containers/0/ports, value: [{name: http, containerPort: %d}]}
      - {op: replace, path: /spec/template/spec/containers/0/env, value: [{name: ROUTER, value: kv}, {name: TIME_SCALE, value: "5"}, {name: LISTEN, value: %q}]}
  - target: {kind: Job, name: fleetbench-coordinator}
    patch: |%s
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: %q}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: %q}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}}
      - {op: replace, path: /spec/template/spec/containers/0/args, value: %s}
      - {op: replace, path: /spec/template/spec/containers/0/ports, value: [{name: grpc, containerPort: %d}, {name: metrics, containerPort: %d}]}
      - {op: replace, path: /spec/template/spec/containers/0/resources, value: {requests: {cpu: 100m, memory: 256Mi}, limits: {memory: 2Gi}}}
`, ns, filepath.ToSlash(rel), image, tag, placement, p.sim, simAddr, placement, api.Hostname(), api.Port(), argsJSON, p.grpc, p.metrics)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = ktypes.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build: %v\n%s", err, kustomization)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		mp, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: mp})
	}
	return objs
}

// applier creates rendered objects with a dynamic client, as `kubectl
// apply` would (server-side apply).
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// apply applies o; a kind the cluster does not serve (the
// ServiceMonitor without the Prometheus operator) is reported as false.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("map %s: %w", gvk, err)
	}
	b, err := json.Marshal(o.Object)
	if err != nil {
		return false, err
	}
	_, err = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: "fleetbench-e2e", Force: new(true)})
	if err != nil {
		return false, fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	return true, nil
}

// resultsVolume makes the PersistentVolume the base's claim binds to: a
// directory on the node, owned by the image's user.
func resultsVolume(t *testing.T, cs kubernetes.Interface, ns string, node kubetest.RealNode) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-results"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			},
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: "fleetbench-results"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: kubetest.RealNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"},
				}}}},
			}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.WithoutCancel(t.Context()), pv.Name, metav1.DeleteOptions{})
	})
	return dir
}

// podWatch polls a namespace's pods and remembers what it saw: the
// simulator's pod UIDs and every agent pod, whose logs it follows.
type podWatch struct {
	mu        sync.Mutex
	simUIDs   []types.UID
	agents    map[string]*agentSeen
	followers sync.WaitGroup
}

type agentSeen struct {
	image, node string
	ran         bool
	logs        strings.Builder
}

func watchPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) *podWatch {
	w := &podWatch{agents: map[string]*agentSeen{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					w.see(ctx, cs, &p)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { <-done; w.followers.Wait() })
	return w
}

func (w *podWatch) see(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch p.Labels[kubejob.LabelComponent] {
	case "agent":
		a := w.agents[p.Name]
		if a == nil {
			a = &agentSeen{image: p.Spec.Containers[0].Image, node: p.Spec.NodeName}
			w.agents[p.Name] = a
		}
		// A pod is first seen before the scheduler binds it: keep the
		// node it ends up on.
		if p.Spec.NodeName != "" {
			a.node = p.Spec.NodeName
		}
		if p.Status.Phase == corev1.PodRunning && !a.ran {
			a.ran = true
			w.followers.Add(1)
			go func() {
				defer w.followers.Done()
				w.follow(ctx, cs, p.Namespace, p.Name, a)
			}()
		}
	default:
		if p.Labels["app.kubernetes.io/name"] == "fleetbench-sim" && !slices.Contains(w.simUIDs, p.UID) {
			w.simUIDs = append(w.simUIDs, p.UID)
		}
	}
}

// follow copies a pod's log stream (the kubelet's, through the API
// server) until the container ends or the pod goes.
func (w *podWatch) follow(ctx context.Context, cs kubernetes.Interface, ns, name string, a *agentSeen) {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		w.mu.Lock()
		fmt.Fprintf(&a.logs, "(follow logs: %v)\n", err)
		w.mu.Unlock()
		return
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		w.mu.Lock()
		a.logs.WriteString(sc.Text() + "\n")
		w.mu.Unlock()
	}
}

// agentView is what the watch saw of one agent pod.
type agentView struct {
	image, node, logs string
	ran               bool
}

func (w *podWatch) snapshot() (sims []types.UID, agents map[string]agentView) {
	w.mu.Lock()
	defer w.mu.Unlock()
	agents = map[string]agentView{}
	for n, a := range w.agents {
		agents[n] = agentView{image: a.image, node: a.node, ran: a.ran, logs: a.logs.String()}
	}
	return slices.Clone(w.simUIDs), agents
}

// TestE2ESweepInCluster runs deploy/examples/sim on the real node as a user
// would: the simulator as a Deployment, the coordinator as the base's Job
// under the base's ServiceAccount and Role, a sweep of 2 routing modes x 2
// levels (1,600 sessions at the top) whose patch switch rolls the
// simulator's Deployment, agents as an Indexed Job of 2 real pods, and the
// results copied off the cluster with `fleetbench fetch`.
func TestE2ESweepInCluster(t *testing.T) {
	restCfg, node := kubetest.Real(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	ctx := t.Context()
	pp := freePorts(t, 3)
	ports := e2ePorts{sim: pp[0], grpc: pp[1], metrics: pp[2]}

	// The agents' token, as deploy/README.md has users create it.
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetbench-agent-token"},
		StringData: map[string]string{"token": "e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resultsVolume(t, cs, ns, node)
	watch := watchPods(t, ctx, cs, ns)
	ap := newApplier(t, restCfg)
	// Everything at once, like `kubectl apply -k`: the sweep waits for the
	// simulator to come up.
	for _, o := range renderSimExample(t, ns, node, restCfg.Host, ports, "[200, 1600]") {
		applied, err := ap.apply(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !applied {
			t.Logf("%s %s not applied: this cluster does not serve the kind (no Prometheus operator)", o.GetKind(), o.GetName())
		}
	}

	start := time.Now()
	out := filepath.Join(t.TempDir(), "results")
	fetch := startProc(t, ctx, "fetch", "", nil, map[string]string{"KUBECONFIG": os.Getenv(kubetest.EnvKubeconfig)},
		"fetch", "--kube-namespace", ns, "--port", strconv.Itoa(ports.metrics), "--wait", "8m", "-o", out)
	if code := fetch.wait(t, 9*time.Minute); code != exitOK {
		t.Fatalf("fleetbench fetch: exit %d\n%s\ncoordinator log:\n%s", code, fetch, jobLogs(t, cs, ns, "fleetbench-coordinator"))
	}
	t.Logf("sweep done and fetched in %s: %s", time.Since(start).Round(time.Second), strings.TrimSpace(fetch.out.String()))
	coordLog := jobLogs(t, cs, ns, "fleetbench-coordinator")

	// The files a user reads, with both modes.
	for _, f := range []string{"report.md", "baseline.json", "sweep.yaml", "points/run1-kv-c1600/result.json", "points/run1-round_robin-c1600/result.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("fetched results lack %s: %v", f, err)
		}
	}
	tsvs, _ := filepath.Glob(filepath.Join(out, "benchmark-sweep-*.tsv"))
	if len(tsvs) != 1 {
		t.Fatalf("sweep TSVs %v, want one", tsvs)
	}
	tsv, err := os.ReadFile(tsvs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tsv), "\nkv\t1600\t") || !strings.Contains(string(tsv), "\nround_robin\t1600\t") {
		t.Errorf("TSV lacks a mode:\n%s", tsv)
	}
	hit := map[string]float64{}
	for _, mode := range []string{"kv", "round_robin"} {
		for _, level := range []int{200, 1600} {
			dir := filepath.Join(out, "points", fmt.Sprintf("run1-%s-c%d", mode, level))
			var point struct {
				Agents   int     `json:"agents"`
				Coverage float64 `json:"coverage"`
				Degraded bool    `json:"degraded"`
			}
			readJSON(t, filepath.Join(dir, "point.json"), &point)
			if point.Agents != 2 || point.Coverage != 1 || point.Degraded {
				t.Errorf("%s at %d: agents %d, coverage %g, degraded %t; want 2 agents, full coverage", mode, level, point.Agents, point.Coverage, point.Degraded)
			}
			if level == 1600 {
				var res struct {
					KVHitRate float64 `json:"kv_hit_rate"`
					Completed int     `json:"completed"`
				}
				readJSON(t, filepath.Join(dir, "result.json"), &res)
				hit[mode] = res.KVHitRate
				t.Logf("%s at 1,600 sessions: %d requests, KV hit rate %.3f", mode, res.Completed, res.KVHitRate)
			}
		}
	}
	if hit["kv"] <= hit["round_robin"] {
		t.Errorf("KV hit rate at 1,600: kv %.3f, round_robin %.3f; want kv higher", hit["kv"], hit["round_robin"])
	}

	// The agents: two real pods of the image, on the node, that joined and
	// whose every report the coordinator applied.
	sims, agents := watch.snapshot()
	if len(agents) != 2 {
		t.Errorf("%d agent pods, want 2: %v", len(agents), agents)
	}
	sent := 0
	for name, a := range agents {
		if a.image != node.Image || a.node != node.Name || !a.ran {
			t.Errorf("agent pod %s: image %q on %q, ran %t; want %s on %s", name, a.image, a.node, a.ran, node.Image, node.Name)
		}
		if !strings.Contains(a.logs, `"connected to coordinator"`) {
			t.Errorf("agent pod %s never connected; its log:\n%s", name, a.logs)
		}
		n, unacked, ok := agentDone(a.logs)
		if !ok {
			t.Errorf("agent pod %s: no final line in its log:\n%s", name, a.logs)
		}
		if unacked != 0 {
			t.Errorf("agent pod %s: %d reports never acked", name, unacked)
		}
		sent += n
	}
	applied := coordinatorMetric(t, cs, ns, ports.metrics, "fleetbench_coordinator_reports_applied_total")
	if float64(sent) != applied {
		t.Errorf("agents sent %d reports, the coordinator applied %g", sent, applied)
	}
	t.Logf("agents sent %d reports, the coordinator applied %g", sent, applied)

	// The patch switch really restarted the simulator: kv (already set, no
	// rollout), round_robin (a new pod), then kv restored (another).
	if len(sims) < 3 {
		t.Errorf("saw %d simulator pods (%v), want 3: the first, round_robin's, and kv's restored", len(sims), sims)
	}
	if !strings.Contains(coordLog, "routing mode switched") {
		t.Errorf("coordinator log lacks the switch:\n%s", coordLog)
	}

	// What the coordinator created is gone: the agents' Job and its pods.
	if err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelComponent + "=agent"})
		if err != nil {
			return false, err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelComponent + "=agent"})
		if err != nil {
			return false, err
		}
		return len(jobs.Items) == 0 && len(pods.Items) == 0, nil
	}); err != nil {
		t.Errorf("the agents' Job or pods remain after the sweep: %v", err)
	}
}

// coordinatorMetric reads one sample from the running coordinator's
// /metrics through the API server's pod proxy.
func coordinatorMetric(t *testing.T, cs kubernetes.Interface, ns string, port int, name string) float64 {
	t.Helper()
	pod := jobPod(t, cs, ns, "fleetbench-coordinator")
	b, err := cs.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(port), "metrics", nil).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the coordinator's metrics: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, name+" "); found {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("the coordinator's metrics lack %s", name)
	return 0
}

func jobPod(t *testing.T, cs kubernetes.Interface, ns, job string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod of job %s: %v", job, err)
	}
	return pods.Items[0].Name
}

// jobLogs returns the logs of a Job's pods, for a failure message.
func jobLogs(t *testing.T, cs kubernetes.Interface, ns, job string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.WithoutCancel(t.Context()), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		rc, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).Stream(context.WithoutCancel(t.Context()))
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p.Name, err)
			continue
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		fmt.Fprintf(&b, "--- %s (%s)\n%s", p.Name, p.Status.Phase, data)
	}
	return b.String()
}

// e2eCoordinatorArgs are the flags of a coordinator on this machine whose
// agents run as real pods on the real node.
func e2eCoordinatorArgs(ns string, node kubetest.RealNode, grpc int, target, out string, extra ...string) []string {
	addr := "127.0.0.1:" + strconv.Itoa(grpc)
	return append([]string{"coordinator", "--listen", addr, "--coordinator-service", addr,
		"--kube-agents", "--kube-namespace", ns, "--agent-image", node.Image, "--agent-pull-policy", "IfNotPresent",
		"--agent-host-network", "--node-selector", kubetest.RealNodeLabel + "=true", "--toleration", kubetest.RealNodeLabel + ":NoSchedule",
		"--token-secret", "", "--agent-retries", "0", "--agent-cpu", "300m", "--agent-overcommit",
		"--target", target, "--model", "sim-model", "--api-key-env", "", "--prompt-tokens", "500", "--max-tokens", "32",
		"--out", out}, extra...)
}

// waitAgentPods waits until n agent pods run and returns them by index.
func waitAgentPods(t *testing.T, cs kubernetes.Interface, ns string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	err := kubetest.Poll(t.Context(), func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelComponent + "=agent"})
		if err != nil {
			return false, err
		}
		running = running[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			}
		}
		return len(running) == n, nil
	})
	if err != nil {
		t.Fatalf("wait for %d running agent pods: %v", n, err)
	}
	slices.SortFunc(running, func(a, b corev1.Pod) int {
		return strings.Compare(a.Annotations["batch.kubernetes.io/job-completion-index"], b.Annotations["batch.kubernetes.io/job-completion-index"])
	})
	return running
}

// TestE2EAgentPodKilled deletes one of two agent pods mid-level (what a
// node drain or an eviction does) and checks the level completes, says
// what coverage was lost, and keeps what the lost agent reported before.
func TestE2EAgentPodKilled(t *testing.T) {
	restCfg, node := kubetest.Real(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	s := startSim(t)
	out := t.TempDir()
	coord := startProc(t, t.Context(), "coordinator", "", nil, map[string]string{"KUBECONFIG": os.Getenv(kubetest.EnvKubeconfig)},
		e2eCoordinatorArgs(ns, node, freePorts(t, 1)[0], s.URL(), out, "--agents", "2", "--concurrency", "100",
			"--warmup", "2s", "--duration", "30s")...)
	pods := waitAgentPods(t, cs, ns, 2)
	time.Sleep(12 * time.Second) // into the measurement window
	victim := pods[1].Name
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted agent pod %s", victim)
	if code := coord.wait(t, 3*time.Minute); code != exitOK {
		t.Fatalf("coordinator exit %d after losing an agent, want %d (a degraded level is a result)\n%s", code, exitOK, coord)
	}
	stdout := coord.out.String()
	// Lost by the pod watcher ("deleted before it finished") or by its
	// silence ("heartbeat timeout"), whichever sees it first.
	if !strings.Contains(stdout, victim+" lost: ") {
		t.Errorf("stdout does not say which agent was lost and why:\n%s", stdout)
	}
	// The measurement window: degraded, both agents in its coverage, the
	// lost one with the requests it reported before it died.
	files, _ := filepath.Glob(filepath.Join(out, "window-*.json"))
	var measured bool
	for _, f := range files {
		var w struct {
			Kind     string `json:"kind"`
			Degraded bool   `json:"degraded"`
			Counters struct {
				Requests int64 `json:"Requests"`
			} `json:"counters"`
			Coverage []struct {
				Agent       string  `json:"Agent"`
				Seconds     float64 `json:"Seconds"`
				LostSeconds float64 `json:"LostSeconds"`
				Reports     int     `json:"Reports"`
				Requests    int64   `json:"Requests"`
				Lost        bool    `json:"Lost"`
			} `json:"coverage"`
		}
		readJSON(t, f, &w)
		if w.Kind != "measure" {
			continue
		}
		measured = true
		if !w.Degraded || len(w.Coverage) != 2 {
			t.Errorf("%s: degraded %t, %d coverage entries; want degraded, 2", f, w.Degraded, len(w.Coverage))
		}
		var sum int64
		for _, c := range w.Coverage {
			sum += c.Requests
			if c.Agent != victim {
				continue
			}
			if !c.Lost || c.Reports == 0 || c.Requests == 0 || c.LostSeconds <= 0 {
				t.Errorf("the lost agent's coverage %+v: want lost, with its reports and requests kept and the lost seconds stated", c)
			}
			t.Logf("lost agent kept %d requests from %d reports; %.1f s of %.1f s lost", c.Requests, c.Reports, c.LostSeconds, c.Seconds+c.LostSeconds)
		}
		if sum != w.Counters.Requests {
			t.Errorf("coverage sums to %d requests, the window has %d", sum, w.Counters.Requests)
		}
	}
	if !measured {
		t.Errorf("no measurement window among %v", files)
	}
}

// TestE2EAgentOOMKilled gives the agents a memory limit far below what
// their share needs: the kernel kills them (OOMKilled, exit 137) and the
// coordinator must say so in one clear line, within seconds, and fail.
func TestE2EAgentOOMKilled(t *testing.T) {
	restCfg, node := kubetest.Real(t)
	ns := kubetest.Namespace(t, restCfg)
	s := startSim(t)
	out := t.TempDir()
	start := time.Now()
	coord := startProc(t, t.Context(), "coordinator", "", nil, map[string]string{"KUBECONFIG": os.Getenv(kubetest.EnvKubeconfig)},
		e2eCoordinatorArgs(ns, node, freePorts(t, 1)[0], s.URL(), out, "--agents", "1", "--concurrency", "3000",
			"--agent-memory", "24Mi", "--warmup", "2s", "--duration", "60s")...)
	code := coord.wait(t, 3*time.Minute)
	took := time.Since(start)
	if code == exitOK {
		t.Fatalf("coordinator exit 0 although its only agent was OOM-killed\n%s", coord)
	}
	if took > time.Minute {
		t.Errorf("the OOM kill ended the run after %s, want within seconds", took.Round(time.Second))
	}
	stderr := strings.TrimSpace(coord.errb.String())
	last := stderr[strings.LastIndex(stderr, "\n")+1:]
	for _, want := range []string{"out of memory", "--agent-memory"} {
		if !strings.Contains(last, want) {
			t.Errorf("the final error line %q does not say %q", last, want)
		}
	}
	t.Logf("exit %d after %s: %s", code, took.Round(time.Second), last)
}

// TestE2EAgentImageMissing names an agent image the node does not have and
// cannot pull (no registry answers): the run must end within a bounded
// time with one line naming the image and what to check, and delete the
// agents' Job.
func TestE2EAgentImageMissing(t *testing.T) {
	restCfg, node := kubetest.Real(t)
	ns := kubetest.Namespace(t, restCfg)
	cs := kubetest.Client(t, restCfg)
	s := startSim(t)
	missing := node
	// A registry on a closed loopback port: the pull fails here, no
	// lookup leaves the machine.
	missing.Image = "127.0.0.1:1/fleetbench:missing"
	start := time.Now()
	coord := startProc(t, t.Context(), "coordinator", "", nil, map[string]string{"KUBECONFIG": os.Getenv(kubetest.EnvKubeconfig)},
		e2eCoordinatorArgs(ns, missing, freePorts(t, 1)[0], s.URL(), t.TempDir(), "--agents", "1", "--concurrency", "4",
			"--duration", "10s")...)
	code := coord.wait(t, 3*time.Minute)
	took := time.Since(start)
	if code == exitOK {
		t.Fatalf("coordinator exit 0 with an agent image that cannot be pulled\n%s", coord)
	}
	if took > 2*time.Minute {
		t.Errorf("a missing image ended the run after %s, want well under 2 minutes", took.Round(time.Second))
	}
	stderr := strings.TrimSpace(coord.errb.String())
	last := stderr[strings.LastIndex(stderr, "\n")+1:]
	for _, want := range []string{"image", missing.Image} {
		if !strings.Contains(last, want) {
			t.Errorf("the final error line %q does not name %q", last, want)
		}
	}
	if err := kubetest.Poll(t.Context(), func(ctx context.Context) (bool, error) {
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jobs.Items) == 0, err
	}); err != nil {
		t.Errorf("the agents' Job remains: %v", err)
	}
	t.Logf("exit %d after %s: %s", code, took.Round(time.Second), last)
}
