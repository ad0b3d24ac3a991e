//go:build e2e

package kubetest_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
)

// A test gets the environment's config and a namespace of its own, then uses
// the clientset as against any cluster.
func Example() {
	var t testing.TB // the test's *testing.T
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	cs := kubetest.Client(t, cfg)
	_, _ = cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
}
