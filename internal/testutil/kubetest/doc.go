// Package kubetest connects Go tests to the real Kubernetes control plane
// that scripts/kube-env.sh runs on loopback (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok fake nodes; see
// docs/kube-env.md). Only tests import it; it must not reach a cluster other
// than the loopback one the environment names.
//
// A test calls Env to get the admin *rest.Config, then Namespace for a
// namespace of its own that is deleted when the test ends:
//
//	cfg := kubetest.Env(t)
//	ns := kubetest.Namespace(t, cfg)
//
// Without the environment (FLEETBENCH_KUBECONFIG unset) Env skips the test,
// unless FLEETBENCH_REQUIRE_KUBE=1, as `make test` sets, in which case it
// fails. Every function here is safe for concurrent use by parallel tests.
package kubetest
