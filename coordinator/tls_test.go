package coordinator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/internal/testutil/testcert"
)

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := testcert.NewCA(t, "fleetbench test CA").ServerFiles(t, dir)
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
		if err := os.WriteFile(otherCA, testcert.NewCA(t, "some other CA").PEM, 0o600); err != nil {
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
