package coordinator_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAgentRefused(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		hist    hdr.Config
		wantMsg string
	}{
		{"wrong token", "not-the-token", hdr.Config{}, "invalid or missing token"},
		{"missing token", "", hdr.Config{}, "invalid or missing token"},
		{"histogram mismatch", testToken, hdr.Config{LowestMicros: 1, HighestMicros: 60_000_000, SigFigs: 2}, "histogram configuration mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logs})
			c, err := coordinator.New(coordinator.Config{
				Agents: 1, JoinTimeout: 3 * time.Second,
				Stages: []coordinator.Stage{{Level: 1, Duration: time.Second}},
			}, logger)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var agentErr error
			_, runErr := coordinator.RunLocal(ctx, c, 1, coordinator.ServerConfig{Token: testToken},
				func(ctx context.Context, addr string, i int) error {
					a, err := agent.New(agent.Config{ID: "a", Index: -1, Coordinator: addr, Token: tc.token, Histogram: tc.hist},
						scriptedBuilder(1, 0), logger)
					if err != nil {
						return err
					}
					agentErr = a.Run(ctx)
					return agentErr
				})
			if runErr == nil {
				t.Error("run succeeded without agents")
			}
			if !errors.Is(agentErr, agent.ErrRefused) || !strings.Contains(agentErr.Error(), tc.wantMsg) {
				t.Fatalf("agent error = %v, want ErrRefused saying %q", agentErr, tc.wantMsg)
			}
			if strings.Contains(logs.String(), testToken) || (tc.token != "" && strings.Contains(logs.String(), tc.token)) {
				t.Fatal("a token appears in the logs")
			}
		})
	}
}
