package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Pods finds the serving pods whose /metrics to read through the
// Kubernetes API: those matching Selector in Namespace, read at
// http://POD_IP:Port/Path. They are listed again at every window's Begin,
// so a rollout's new pods are read from the next window on.
type Pods struct {
	// Namespace is the pods' namespace ("": the client's default,
	// DefaultPodNamespace).
	Namespace string `json:"namespace,omitempty"`
	// Selector is a label selector, e.g. app=vllm,role=worker.
	Selector string `json:"selector"`
	// Port is the metrics port; Path the metrics path (default /metrics).
	Port int    `json:"port"`
	Path string `json:"path,omitempty"`
}

// DefaultPodNamespace is the namespace of Pods without one.
const DefaultPodNamespace = "default"

// validate reports every problem of p at once.
func (p *Pods) validate() []error {
	var errs []error
	if strings.TrimSpace(p.Selector) == "" {
		errs = append(errs, errors.New("scrape pods: a label selector is required, e.g. app=vllm"))
	} else if _, err := labels.Parse(p.Selector); err != nil {
		errs = append(errs, fmt.Errorf("scrape pods: selector %q: %w", p.Selector, err))
	}
	if p.Port <= 0 || p.Port > 65535 {
		errs = append(errs, fmt.Errorf("scrape pods: port %d: want the metrics port, 1-65535", p.Port))
	}
	if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
		errs = append(errs, fmt.Errorf("scrape pods: path %q must begin with /", p.Path))
	}
	return errs
}

// WithKubernetes gives the Scraper the API client that Config.Pods are
// listed with.
func WithKubernetes(cs kubernetes.Interface) Option { return func(s *Scraper) { s.kube = cs } }

// podEndpoints lists the running, ready pods that p selects and returns
// their metrics URLs, sorted.
func podEndpoints(ctx context.Context, cs kubernetes.Interface, p *Pods) ([]string, error) {
	ns := p.Namespace
	if ns == "" {
		ns = DefaultPodNamespace
	}
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: p.Selector})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list pods %q in %s: the ServiceAccount needs the verb list on pods there (deploy/base/rbac.yaml): %w", p.Selector, ns, err)
	}
	if err != nil {
		return nil, fmt.Errorf("list pods %q in %s: %w", p.Selector, ns, err)
	}
	path := p.Path
	if path == "" {
		path = "/metrics"
	}
	var out []string
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || !podReady(pod) {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.Port))+path)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
