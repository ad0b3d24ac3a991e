package coordinator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
)

// testCA is a throw-away certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverFiles writes a certificate for 127.0.0.1 signed by ca and its key;
// it returns the CA, certificate and key file paths.
func (ca *testCA) serverFiles(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "coordinator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, b := range map[string][]byte{
		caFile:   ca.pem,
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := newTestCA(t, "fleetbench test CA").serverFiles(t, dir)
	sc := &coordinator.ServerConfig{Token: testToken, CertFile: certFile, KeyFile: keyFile}

	t.Run("trusted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := fleet{
			agents: 2, builder: scriptedBuilder(3, 0), server: sc,
			agentCfg: func(_ int, c *agent.Config) { c.CAFile = caFile },
			cfg:      coordinator.Config{Stages: []coordinator.Stage{{Level: 4, Duration: time.Minute, Conversations: 40}}},
		}.run(t, ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Stages[0].Measured.Counters.Requests; got != 120 {
			t.Fatalf("%d requests over TLS, want 120", got)
		}
	})

	t.Run("untrusted CA", func(t *testing.T) {
		otherCA := filepath.Join(t.TempDir(), "other.pem")
		if err := os.WriteFile(otherCA, newTestCA(t, "some other CA").pem, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := coordinator.New(coordinator.Config{
			Agents: 1, JoinTimeout: 3 * time.Second, Stages: []coordinator.Stage{{Level: 1, Duration: time.Second}},
		}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var agentErr error
		_, runErr := coordinator.RunLocal(ctx, c, 1, *sc, func(ctx context.Context, addr string, _ int) error {
			a, err := agent.New(agent.Config{ID: "a", Index: -1, Coordinator: addr, Token: testToken, CAFile: otherCA},
				scriptedBuilder(1, 0), testLogger(t))
			if err != nil {
				return err
			}
			agentErr = a.Run(ctx)
			return agentErr
		})
		if runErr == nil {
			t.Error("run succeeded without its agent")
		}
		if !errors.Is(agentErr, agent.ErrRefused) || !strings.Contains(agentErr.Error(), "certificate") {
			t.Fatalf("agent error = %v, want ErrRefused about the certificate", agentErr)
		}
	})
}
