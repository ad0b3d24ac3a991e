package kubetest

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TokenSeconds is the lifetime asked for the tokens ImpersonateServiceAccount
// requests: an hour, longer than any test.
const TokenSeconds = 3600

// ImpersonateServiceAccount returns a config that authenticates as the
// ServiceAccount ns/name, which must exist, with a bound token from the
// TokenRequest API: requests made with it pass through authentication and
// RBAC exactly as an in-cluster pod's would. cfg supplies the apiserver
// address, its CA and the credentials to request the token; the returned
// config keeps none of cfg's credentials.
func ImpersonateServiceAccount(ctx context.Context, cfg *rest.Config, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new clientset: %w", err)
	}
	expiry := int64(TokenSeconds)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for serviceaccount %s/%s: %w", ns, name, err)
	}
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	sa.QPS, sa.Burst = QPS, Burst
	return sa, nil
}
