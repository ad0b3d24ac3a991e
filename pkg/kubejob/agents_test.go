package kubejob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// testOptions are options that make a valid one-agent Job.
func testOptions() Options {
	return Options{Enabled: true, Image: "fleetbench:dev", Service: "coord:7070", Agents: 1, AgentsSet: true}
}

// startFake starts o's agents on a fake clientset in namespace bench and
// returns the Job's name once its pods are watched, so pods created then
// are seen.
func startFake(t *testing.T, ctx context.Context, o Options) (context.Context, *Agents, kubernetes.Interface, string) {
	t.Helper()
	t.Setenv(EnvPodName, "")
	cs, watching := watchedClientset()
	runCtx, a, err := start(ctx, hclog.NewNullLogger(), cs, "bench", o, 8, WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	select {
	case <-watching["pods"]:
	case <-ctx.Done():
		t.Fatal("the agents' pods were never watched")
	}
	jobs, err := cs.BatchV1().Jobs("bench").List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs %v, %v; want one", jobs, err)
	}
	return runCtx, a, cs, jobs.Items[0].Name
}

// agentPod creates pod i of job with the given status.
func agentPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, job, i string, status corev1.PodStatus) *corev1.Pod {
	t.Helper()
	p := pod("u"+i, i, status)
	p.Name = job + "-" + i + "-abcde"
	p.Labels = map[string]string{LabelAgents: job}
	p, err := cs.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStartLossAndStop: a lost agent is reported on Losses while the run
// goes on, and Stop deletes the Job and ends the run's context without a
// cause of the agents'.
func TestStartLossAndStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	runCtx, a, cs, job := startFake(t, ctx, testOptions())
	if a.Count() != 1 {
		t.Errorf("Count = %d, want 1", a.Count())
	}
	p := agentPod(t, ctx, cs, job, "0", terminated("OOMKilled", 137))
	select {
	case l := <-a.Losses():
		if l.ID != p.Name || !strings.Contains(l.Reason, "memory") {
			t.Errorf("loss %+v, want %s out of memory", l, p.Name)
		}
	case <-ctx.Done():
		t.Fatal("no loss reported")
	}
	if runCtx.Err() != nil {
		t.Fatalf("run ended by a lost agent: %v", context.Cause(runCtx))
	}

	a.Stop()
	a.Stop() // idempotent
	if _, err := cs.BatchV1().Jobs("bench").Get(ctx, job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job after Stop: %v, want NotFound", err)
	}
	if runCtx.Err() == nil {
		t.Error("run context still live after Stop")
	}
	if err := Cause(runCtx, context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("Cause after Stop = %v, want the run's own error", err)
	}
}

// TestStartFatal: a condition the agents cannot survive cancels the run
// with an *Error as the cause, which Cause returns for the run's error.
func TestStartFatal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	runCtx, _, cs, job := startFake(t, ctx, testOptions())
	agentPod(t, ctx, cs, job, "0", waiting("ImagePullBackOff", "Back-off pulling image"))
	select {
	case <-runCtx.Done():
	case <-ctx.Done():
		t.Fatal("run not canceled by an image that cannot be pulled")
	}
	var kerr *Error
	if err := Cause(runCtx, context.Canceled); !errors.As(err, &kerr) || kerr.Kind != KindImagePullBackOff {
		t.Errorf("Cause = %v, want an ImagePullBackOff *Error", err)
	}
	if err := Cause(runCtx, nil); err != nil {
		t.Errorf("Cause of a run that succeeded = %v, want nil", err)
	}
}

// TestStartImage: without an image the agents run the image of the pod
// this process runs in; a pod that cannot be read fails the start.
func TestStartImage(t *testing.T) {
	const own = "registry.invalid/fleetbench@sha256:0123"
	tests := []struct {
		name      string
		image     string
		podNS     string // $POD_NAMESPACE; $POD_NAME is "coordinator"
		wantImage string // "" with wantErr
		wantErr   string
	}{
		{name: "given", image: "fleetbench:dev", podNS: "bench", wantImage: "fleetbench:dev"},
		{name: "own", podNS: "bench", wantImage: own},
		{name: "own pod missing", podNS: "elsewhere", wantErr: "--agent-image"},
		{name: "not in a pod", wantErr: "image: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(&corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "coordinator", Namespace: "bench"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coordinator", Image: own}}},
			})
			t.Setenv(EnvPodNamespace, tt.podNS)
			t.Setenv(EnvPodName, "coordinator")
			t.Setenv(EnvPodUID, "")
			o := testOptions()
			o.Image = tt.image
			_, a, err := start(t.Context(), hclog.NewNullLogger(), cs, "bench", o, 8)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("start: %v, want an error naming %q", err, tt.wantErr)
				}
				if jobs, _ := cs.BatchV1().Jobs("bench").List(t.Context(), metav1.ListOptions{}); len(jobs.Items) != 0 {
					t.Errorf("a failed start left %d jobs", len(jobs.Items))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Stop()
			jobs, err := cs.BatchV1().Jobs("bench").List(t.Context(), metav1.ListOptions{})
			if err != nil || len(jobs.Items) != 1 {
				t.Fatalf("jobs %v, %v; want one", jobs, err)
			}
			if got := jobs.Items[0].Spec.Template.Spec.Containers[0].Image; got != tt.wantImage {
				t.Errorf("agent image %q, want %q", got, tt.wantImage)
			}
		})
	}
}

// TestNilAgents: nil agents (no --kube-agents) are no agents.
func TestNilAgents(t *testing.T) {
	var a *Agents
	a.Stop()
	if a.Count() != 0 || a.Losses() != nil {
		t.Errorf("nil agents: count %d, losses %v", a.Count(), a.Losses())
	}
}

// TestClientConfigNamespace: the namespace is the one asked for, else
// $POD_NAMESPACE, else the kubeconfig context's.
func TestClientConfigNamespace(t *testing.T) {
	if _, err := os.Stat(inClusterNamespaceFile); err == nil {
		t.Skip("runs in a pod: its namespace file comes before the kubeconfig's")
	}
	kubeconfig := filepath.Join(t.TempDir(), "config")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: from-context}}]
current-context: x
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	tests := []struct {
		name, ns, podNS, want string
	}{
		{"asked", "asked", "pod", "asked"},
		{"pod's", "", "pod", "pod"},
		{"context's", "", "", "from-context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvPodNamespace, tt.podNS)
			rc, ns, err := clientConfig(tt.ns)
			if err != nil {
				t.Fatal(err)
			}
			if ns != tt.want || rc.Host != "https://127.0.0.1:6443" || rc.QPS != 20 {
				t.Errorf("clientConfig(%q) = host %s, qps %g, namespace %q; want namespace %q", tt.ns, rc.Host, rc.QPS, ns, tt.want)
			}
		})
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	if _, _, err := clientConfig(""); err == nil {
		t.Error("clientConfig with a missing kubeconfig succeeded")
	}
}

// TestStartMetricsPort: the agents' Job, as created through the API, has
// each agent serve its own metrics on --agent-metrics-port (default
// DefaultAgentMetricsPort): the flag, a named container port and the
// scrape annotations; 0 turns all three off.
func TestStartMetricsPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int // 0: no metrics
	}{
		{"default", nil, DefaultAgentMetricsPort},
		{"other port", []string{"--agent-metrics-port", "9300"}, 9300},
		{"off", []string{"--agent-metrics-port", "0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			args := append([]string{"--kube-agents", "--agent-image", "fleetbench:dev", "--coordinator-service", "coord:7070", "--token-secret", ""}, tc.args...)
			_, _, cs, name := startFake(t, ctx, parseOptions(t, args...))
			job, err := cs.BatchV1().Jobs("bench").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tmpl := job.Spec.Template
			c := tmpl.Spec.Containers[0]
			listen := ""
			if i := slices.Index(c.Args, "--metrics-listen"); i >= 0 && i+1 < len(c.Args) {
				listen = c.Args[i+1]
			}
			var port int32
			for _, p := range c.Ports {
				if p.Name == MetricsPortName {
					port = p.ContainerPort
				}
			}
			ann := tmpl.Annotations
			if tc.want == 0 {
				if listen != "" || len(c.Ports) != 0 || ann[AnnotationScrape] != "" {
					t.Errorf("args %q ports %v annotations %v: want no metrics", c.Args, c.Ports, ann)
				}
				return
			}
			p := strconv.Itoa(tc.want)
			if listen != ":"+p || port != int32(tc.want) {
				t.Errorf("--metrics-listen %q, port %q = %d; want :%s on port %s", listen, MetricsPortName, port, p, p)
			}
			if ann[AnnotationScrape] != "true" || ann[AnnotationPort] != p || ann[AnnotationPath] != "/metrics" {
				t.Errorf("annotations %v: want the scrape annotations of port %s", ann, p)
			}
			// The agents' PodMonitor selects them by these labels.
			if l := tmpl.Labels; l[LabelName] != "fleetbench" || l[LabelComponent] != "agent" {
				t.Errorf("pod labels %v", l)
			}
		})
	}
}
