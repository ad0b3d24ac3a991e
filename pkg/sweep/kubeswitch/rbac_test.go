//go:build e2e

package kubeswitch_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

// TestRoleLeastPrivilege checks the coordinator's Role from deploy/base,
// acting as its ServiceAccount: what fleetbench does is allowed, and
// neighbouring verbs it never uses are forbidden.
func TestRoleLeastPrivilege(t *testing.T) {
	cfg := kubetest.Env(t)
	ns := kubetest.Namespace(t, cfg)
	installCRD(t, cfg, "testdata/dgd-crd.yaml", kubeswitch.DGDResource, ns)
	sa := coordinatorConfig(t, cfg, ns)
	cs := kubetest.Client(t, sa)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	for _, c := range []struct {
		verb, group, resource string
		want                  bool
	}{
		// The agent Job manager.
		{"create", "batch", "jobs", true},
		{"get", "batch", "jobs", true},
		{"list", "batch", "jobs", true},
		{"watch", "batch", "jobs", true},
		{"delete", "batch", "jobs", true},
		{"get", "", "pods", true},
		{"list", "", "pods", true},
		{"watch", "", "pods", true},
		// The switches.
		{"delete", "", "pods", true},
		{"get", "nvidia.com", "dynamographdeployments", true},
		{"patch", "nvidia.com", "dynamographdeployments", true},
		{"get", "kubeai.org", "models", true},
		{"patch", "kubeai.org", "models", true},
		{"get", "apps", "deployments", true},
		{"patch", "apps", "deployments", true},
		// Never used.
		{"update", "batch", "jobs", false},
		{"create", "", "pods", false},
		{"patch", "", "pods", false},
		{"get", "", "secrets", false},
		{"list", "", "secrets", false},
		{"get", "", "configmaps", false},
		{"delete", "nvidia.com", "dynamographdeployments", false},
		{"update", "nvidia.com", "dynamographdeployments", false},
		{"create", "nvidia.com", "dynamographdeployments", false},
		{"list", "nvidia.com", "dynamographdeployments", false},
		{"delete", "kubeai.org", "models", false},
		{"create", "apps", "deployments", false},
		{"delete", "apps", "deployments", false},
		{"update", "apps", "deployments", false},
		{"create", "rbac.authorization.k8s.io", "roles", false},
	} {
		if got := allowed(ctx, t, cs, ns, c.verb, c.group, c.resource); got != c.want {
			t.Errorf("%s %s.%s allowed = %t, want %t", c.verb, c.resource, c.group, got, c.want)
		}
	}

	// And a real request, not only the review: deleting a DGD is refused.
	err := dynamic.NewForConfigOrDie(sa).Resource(kubeswitch.DGDResource).Namespace(ns).Delete(ctx, "any", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("delete dynamographdeployment as the coordinator: %v, want forbidden", err)
	}
	_, err = cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list secrets as the coordinator: %v, want forbidden", err)
	}
}
