package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// EnvKubeconfig names the variable holding the admin kubeconfig path;
	// `scripts/kube-env.sh start` prints it.
	EnvKubeconfig = "FLEETBENCH_KUBECONFIG"
	// EnvRequire names the variable that, set to "1", turns a missing
	// environment into a test failure instead of a skip.
	EnvRequire = "FLEETBENCH_REQUIRE_KUBE"

	// QPS and Burst are the client rate limits of configs made here: far
	// above client-go's defaults (5 and 10), which would make tests wait on
	// the client instead of the cluster.
	QPS   = 100
	Burst = 200
)

// ErrNoEnv means FLEETBENCH_KUBECONFIG is not set.
var ErrNoEnv = errors.New("no Kubernetes test environment: " + EnvKubeconfig +
	" is not set; run `eval \"$(scripts/kube-env.sh start)\"` or `make test`")

// Env returns a copy of the admin *rest.Config of the test environment. It
// skips the test when FLEETBENCH_KUBECONFIG is unset, unless Required, and
// fails it when the kubeconfig cannot be loaded or the apiserver is not ready.
func Env(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := load(t.Context())
	switch {
	case errors.Is(err, ErrNoEnv) && !Required():
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	return rest.CopyConfig(cfg)
}

// Require is Env for a test that must never be skipped: it fails the test
// when the environment is missing, whatever FLEETBENCH_REQUIRE_KUBE says.
func Require(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rest.CopyConfig(cfg)
}

// Required reports whether FLEETBENCH_REQUIRE_KUBE=1, that is whether Env
// fails instead of skipping when the environment is missing.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Client returns a clientset for cfg, failing the test on error.
func Client(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("new clientset: %v", err)
	}
	return cs
}

// The kubeconfig is loaded and the apiserver checked once per test binary;
// a failure is remembered so every test reports it at once.
var (
	loadOnce sync.Once
	loadCfg  *rest.Config
	loadErr  error
)

func load(ctx context.Context) (*rest.Config, error) {
	loadOnce.Do(func() {
		loadCfg, loadErr = connect(ctx, os.Getenv(EnvKubeconfig))
	})
	return loadCfg, loadErr
}

// connect loads the kubeconfig at path and checks that the apiserver answers
// /readyz, so a dead environment is one clear error instead of a timeout in
// every test.
func connect(ctx context.Context, path string) (*rest.Config, error) {
	if path == "" {
		return nil, ErrNoEnv
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load %s=%s: %w", EnvKubeconfig, path, err)
	}
	cfg.QPS, cfg.Burst = QPS, Burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("check apiserver /readyz at %s (is scripts/kube-env.sh running?): %w", cfg.Host, err)
	}
	return cfg, nil
}
