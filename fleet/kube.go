package fleet

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// StartKube starts the agents o asks for as an Indexed Job (pkg/kubejob),
// sized by the largest level of cfg's stages, and sets cfg.Agents to their
// count. The context it returns is canceled with the cause when the agents
// cannot run (pass Run's error through kubejob.Cause); the caller must
// Stop the agents, which deletes the Job. Without o.Enabled it returns ctx
// and nil agents, whose Stop does nothing and whose Losses is nil.
func StartKube(ctx context.Context, logger hclog.Logger, o kubejob.Options, cfg *coordinator.Config) (context.Context, *kubejob.Agents, error) {
	if !o.Enabled {
		return ctx, nil, nil
	}
	maxLevel := 0
	for _, s := range cfg.Stages {
		maxLevel = max(maxLevel, s.Level)
	}
	ctx, agents, err := kubejob.Start(ctx, logger, o, maxLevel)
	if err != nil {
		return ctx, nil, err
	}
	cfg.Agents = agents.Count()
	return ctx, agents, nil
}
