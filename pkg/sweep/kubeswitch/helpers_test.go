//go:build e2e

package kubeswitch_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/internal/testutil/kubetest"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the CRD in file unless it exists (CRDs are cluster-wide
// and shared by parallel tests, so it is never deleted) and waits until its
// resource can be listed in ns.
func installCRD(t *testing.T, cfg *rest.Config, file string, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = dyn.Resource(crdResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create CRD from %s: %v", file, err)
	}
	err = kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("wait for %s to be served: %v", gvr, err)
	}
}

// coordinatorConfig applies the ServiceAccount, Role and RoleBinding of
// deploy/base, rendered by kustomize, into ns and returns a config that acts
// as that ServiceAccount, so every request a test's switch makes passes
// through the Role fleetbench ships.
func coordinatorConfig(t *testing.T, cfg *rest.Config, ns string) *rest.Config {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../../../deploy/base")
	if err != nil {
		t.Fatalf("kustomize build deploy/base: %v", err)
	}
	cs := kubetest.Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var sa string
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "ServiceAccount":
			var o corev1.ServiceAccount
			mustUnmarshal(t, b, &o)
			o.Namespace, sa = ns, o.Name
			_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			mustUnmarshal(t, b, &o)
			o.Namespace = ns
			_, err = cs.RbacV1().Roles(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			mustUnmarshal(t, b, &o)
			o.Namespace = ns
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
			_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s %s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	if sa == "" {
		t.Fatal("deploy/base has no ServiceAccount")
	}
	saCfg, err := kubetest.ImpersonateServiceAccount(ctx, cfg, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of a new RoleBinding through an informer; wait
	// until the Role is in force.
	saCS := kubetest.Client(t, saCfg)
	err = kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		return allowed(ctx, t, saCS, ns, "patch", "nvidia.com", "dynamographdeployments"), nil
	})
	if err != nil {
		t.Fatalf("wait for the Role to bind: %v", err)
	}
	return saCfg
}

func mustUnmarshal(t *testing.T, b []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

// allowed asks the apiserver whether the client's user may do verb on
// group/resource in ns.
func allowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, verb, group, resource string) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review %s %s.%s: %v", verb, resource, group, err)
	}
	return r.Status.Allowed
}

// newSwitch builds a switch of kind acting with cfg; poll_interval and
// timeout default to test-sized values.
func newSwitch(t *testing.T, cfg *rest.Config, kind, ns string, opts map[string]string) sweep.Switcher {
	t.Helper()
	o := map[string]string{"namespace": ns, "poll_interval": "100ms", "timeout": "90s"}
	for k, v := range opts {
		o[k] = v
	}
	sw, err := kubeswitch.New(sweep.SwitchSpec{Kind: kind, Options: o}, sweep.SwitchEnv{}, kubeswitch.WithRESTConfig(cfg))
	if err != nil {
		t.Fatalf("new %s switch: %v", kind, err)
	}
	return sw
}

// deployment returns a Deployment of replicas pods labelled labels, with
// one container "main" (or name) and env.
func deployment(name, container string, replicas int32, labels map[string]string, env ...corev1.EnvVar) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: container, Image: "example.invalid/" + container + ":1", Env: env}},
				},
			},
		},
	}
}

// pods returns the running pods selector picks (terminating ones left out).
func pods(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func uids(ps []corev1.Pod) map[types.UID]bool {
	m := map[types.UID]bool{}
	for _, p := range ps {
		m[p.UID] = true
	}
	return m
}

// envOf returns the value of name in the pod's container, or "<unset>".
func envOf(p corev1.Pod, container, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return "<unset>"
}

// waitRolledOut waits for a Deployment as `kubectl rollout status` would.
func waitRolledOut(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	err := kubetest.Poll(ctx, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return rolledOut(d), nil
	})
	if err != nil {
		t.Fatalf("wait for deployment %s: %v", name, err)
	}
}

func rolledOut(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == *d.Spec.Replicas &&
		s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
}

// toUnstructured converts a typed object for the dynamic client.
func lower(s string) string { return strings.ToLower(s) }

func describe(ps []corev1.Pod, container, env string) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s=%s ", p.Name, envOf(p, container, env))
	}
	return b.String()
}
