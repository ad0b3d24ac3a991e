package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetbench/fleetbench/internal/bundle"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// fetchOptions are the fetch command's flags.
type fetchOptions struct {
	namespace, job, port, out string
	wait                      time.Duration
	partial                   bool
}

// fetchCmd copies a coordinator's output directory off the cluster: it
// finds the Job's pod and reads /results.tar.gz from its metrics port
// through the API server's pod proxy (what `kubectl get --raw` does), so
// it needs no port-forward, no tar in the image and no volume access.
func (c *cli) fetchCmd() *cobra.Command {
	o := fetchOptions{job: "fleetbench-coordinator", port: "9090"}
	cmd := &cobra.Command{
		Use:   "fetch [-o DIR] [flags]",
		Short: "copy an in-cluster coordinator's output directory to this machine",
		Long: "Downloads the output directory a coordinator Job serves on its metrics port\n" +
			"(/results.tar.gz) through the API server's pod proxy and unpacks it into DIR. The\n" +
			"coordinator serves it once its sweep ended, for as long as its --linger; --partial\n" +
			"takes what is written so far. Needs get on pods/proxy in the namespace.",
		Example: "  fleetbench fetch --kube-namespace fleetbench -o results\n" +
			"  fleetbench fetch --wait 30m -o results    # wait for the sweep to end",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.out == "" || o.job == "" || o.port == "" {
				return usagef("-o DIR, --job and --port must not be empty")
			}
			if o.wait < 0 {
				return usagef("--wait must not be negative")
			}
			return c.fetch(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.out, "out", "o", "results", "directory to unpack into")
	fs.StringVar(&o.namespace, "kube-namespace", "", "namespace of the coordinator Job (default: the kubeconfig's)")
	fs.StringVar(&o.job, "job", o.job, "the coordinator Job's name")
	fs.StringVar(&o.port, "port", o.port, "the coordinator's metrics port (its --metrics-listen)")
	fs.DurationVar(&o.wait, "wait", 0, "wait up to this long for the run to end and the coordinator to serve (0: fail at once)")
	fs.BoolVar(&o.partial, "partial", false, "take what the running coordinator has written so far")
	return cmd
}

func (c *cli) fetch(ctx context.Context, o fetchOptions) error {
	cfg, ns, err := kubejob.RESTConfig(o.namespace)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create Kubernetes client: %w", err)
	}
	deadline := time.Now().Add(o.wait)
	for {
		n, err := fetchOnce(ctx, cs, ns, o)
		if err == nil {
			fmt.Fprintf(c.stdout, "fetched %d files into %s\n", n, o.out)
			return nil
		}
		var retry *retryable
		if !errors.As(err, &retry) || time.Now().After(deadline) {
			return err
		}
		c.logger.Info("waiting for the coordinator to serve its results", "reason", retry.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("fetch results: %w (last: %w)", ctx.Err(), err)
		case <-time.After(5 * time.Second):
		}
	}
}

// retryable is a failure that --wait waits out: no running pod yet, the
// run still going, the server not listening yet.
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

func fetchOnce(ctx context.Context, cs kubernetes.Interface, ns string, o fetchOptions) (int, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + o.job})
	if err != nil {
		return 0, fmt.Errorf("list the pods of job %s/%s: %w", ns, o.job, err)
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		if len(pods.Items) == 0 {
			return 0, &retryable{fmt.Errorf("job %s/%s has no pods (is the name right? --job, --kube-namespace)", ns, o.job)}
		}
		return 0, &retryable{fmt.Errorf("job %s/%s has no running pod: the coordinator has exited (run it with --linger to serve its results after the sweep)", ns, o.job)}
	}
	slices.SortFunc(running, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	pod := running[0].Name
	req := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
		Name(pod + ":" + o.port).SubResource("proxy").Suffix(strings.TrimPrefix(bundle.Path, "/"))
	if o.partial {
		req = req.Param("partial", "1")
	}
	body, err := req.Stream(ctx)
	if err != nil {
		err = fmt.Errorf("fetch results from pod %s/%s port %s: %w", ns, pod, o.port, err)
		if apierrors.IsServiceUnavailable(err) {
			return 0, &retryable{err}
		}
		return 0, err
	}
	defer body.Close()
	n, err := bundle.Extract(body, o.out)
	if err != nil {
		return n, fmt.Errorf("fetch results from pod %s/%s: %w", ns, pod, err)
	}
	return n, nil
}
