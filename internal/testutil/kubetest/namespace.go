package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestLabel marks the namespaces Namespace creates, so leftovers of a killed
// test run can be found with `kubectl get ns -l fleetbench.io/test`.
const TestLabel = "fleetbench.io/test"

// Namespace creates a namespace named after the test with a random suffix,
// waits until its default ServiceAccount exists (pods are refused before),
// and deletes it, with everything in it, when the test ends.
func Namespace(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	cs := Client(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: namespacePrefix(t.Name()),
			Labels:       map[string]string{TestLabel: "true"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	err = Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("wait for the default ServiceAccount in %s: %v", name, err)
	}
	return name
}

// namespacePrefix turns a test name into a DNS label prefix: "fbt-", the
// name lower-cased with other characters as '-', cut so the apiserver's
// 5-character random suffix still fits in 63.
func namespacePrefix(test string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(test) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "test"
	}
	const maxBody = 63 - len("fbt-") - len("-") - 5
	if len(s) > maxBody {
		s = strings.TrimRight(s[:maxBody], "-")
	}
	return fmt.Sprintf("fbt-%s-", s)
}
