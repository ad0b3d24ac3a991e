package agent

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// ClientBuilder returns the Builder of a real agent: the workload from the
// spec (pkg/workload, the user model's client included) and a streaming
// client to the spec's target (pkg/client). The API key comes from this
// process's environment, never over the wire, from the variable apiKeyEnv
// or, when that is "", the one the spec names; endpoint, when set,
// overrides the spec's.
func ClientBuilder(logger hclog.Logger, apiKeyEnv, endpoint string) Builder {
	return func(_ context.Context, spec Spec) (Target, error) {
		src, err := workload.Open(spec.Workload, logger)
		if err != nil {
			return Target{}, fmt.Errorf("build workload: %w", err)
		}
		ep, keyEnv := endpoint, apiKeyEnv
		if ep == "" {
			ep = spec.Endpoint
		}
		if keyEnv == "" {
			keyEnv = spec.APIKeyEnv
		}
		cl, err := client.New(client.Config{
			BaseURL: spec.Target, Model: spec.Model, MaxTokens: spec.Workload.MaxTokens, APIKeyEnv: keyEnv, Endpoint: ep,
			WorkerHeader: spec.WorkerHeader,
		}, logger)
		if err != nil {
			return Target{}, &ClassError{Class: ClassConfig, Err: fmt.Errorf("create client: %w", err)}
		}
		return Target{Source: src, Streamer: cl, Close: func() error { cl.Close(); return nil }}, nil
	}
}
