package agent

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// ClientOptions are what an agent process sets for its own client, over
// what the coordinator's spec says.
type ClientOptions struct {
	// APIKeyEnv names the environment variable holding the API key; ""
	// takes the one the spec names.
	APIKeyEnv string
	// Endpoint, when set, overrides the spec's.
	Endpoint string
	// BlockingReads reads every stream on its request's goroutine instead
	// of the client's event loops (client.Config.BlockingReads).
	BlockingReads bool
}

// ClientBuilder returns the Builder of a real agent: the workload from the
// spec (pkg/workload, the user model's client included) and a streaming
// client to the spec's target (pkg/client), as opts amend it. The API key
// comes from this process's environment, never over the wire.
func ClientBuilder(logger hclog.Logger, opts ClientOptions) Builder {
	return func(_ context.Context, spec Spec) (Target, error) {
		src, err := workload.Open(spec.Workload, logger)
		if err != nil {
			return Target{}, fmt.Errorf("build workload: %w", err)
		}
		ep, keyEnv := opts.Endpoint, opts.APIKeyEnv
		if ep == "" {
			ep = spec.Endpoint
		}
		if keyEnv == "" {
			keyEnv = spec.APIKeyEnv
		}
		cl, err := client.New(client.Config{
			BaseURL: spec.Target, Model: spec.Model, MaxTokens: spec.Workload.MaxTokens, APIKeyEnv: keyEnv, Endpoint: ep,
			WorkerHeader: spec.WorkerHeader, BlockingReads: opts.BlockingReads,
		}, logger)
		if err != nil {
			return Target{}, &ClassError{Class: ClassConfig, Err: fmt.Errorf("create client: %w", err)}
		}
		return Target{Source: src, Streamer: cl, Close: func() error { cl.Close(); return nil }}, nil
	}
}
