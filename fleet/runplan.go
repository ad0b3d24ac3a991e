package fleet

import (
	"slices"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// RunPlan is what `run --dry-run` prints: the merged configuration with
// header values left out (they may be credentials) and the target
// redacted. It marshals to YAML or JSON.
type RunPlan struct {
	Target         string          `json:"target"`
	Model          string          `json:"model,omitempty"`
	Endpoint       string          `json:"endpoint"`
	APIKeyEnv      string          `json:"api_key_env,omitempty"`
	Headers        []string        `json:"headers,omitempty"`
	Workload       workload.Config `json:"workload"`
	Concurrency    int             `json:"concurrency,omitempty"`
	RequestRate    float64         `json:"request_rate,omitempty"`
	MaxConcurrency int             `json:"max_concurrency,omitempty"`
	NumPrompts     int             `json:"num_prompts,omitempty"`
	Warmup         string          `json:"warmup"`
	Duration       string          `json:"duration"`
	Agents         int             `json:"agents,omitempty"`
	Out            string          `json:"out"`
	Simulator      *SimConfig      `json:"simulator,omitempty"`
}

// Plan returns c as RunPlan shows it.
func (c RunConfig) Plan() RunPlan {
	rc := c
	p := RunPlan{
		Target: client.RedactURL(rc.Client.BaseURL), Model: rc.Client.Model, Endpoint: rc.Client.Endpoint,
		APIKeyEnv: rc.Client.APIKeyEnv, Workload: rc.Workload, Concurrency: rc.Load.Concurrency,
		RequestRate: rc.Load.RequestRate, MaxConcurrency: rc.Load.MaxConcurrency, NumPrompts: rc.Load.TotalRequests,
		Warmup: rc.Warmup.String(), Duration: rc.Duration.String(), Agents: rc.Agents, Out: rc.OutDir,
	}
	for k := range rc.Client.Headers {
		p.Headers = append(p.Headers, k)
	}
	slices.Sort(p.Headers)
	if p.Target == "" {
		p.Target = "built-in simulator"
		p.Simulator = &rc.Sim
	}
	return p
}
