package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// AgentFunc runs one agent against the coordinator at addr until the
// coordinator tells it to stop or ctx is done. index is 0..k-1.
// cmd_run passes one that builds an agent.Agent; the coordinator package
// never imports the agent package.
type AgentFunc func(ctx context.Context, addr string, index int) error

// agentStopGrace bounds how long RunLocal waits for agents after the run.
const agentStopGrace = 10 * time.Second

// RunLocal runs c with k in-process agents over real loopback gRPC: it
// serves c on 127.0.0.1, starts the agents with start, runs c and returns
// its result once every agent and the server have stopped. An agent that
// fails is logged; the run goes on without it (and is marked degraded) as
// it would in a fleet.
func RunLocal(ctx context.Context, c *Coordinator, k int, sc ServerConfig, start AgentFunc) (*Result, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback: %w", err)
	}
	addr := lis.Addr().String()
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	serveErr := make(chan error, 1)
	go func() { serveErr <- c.Serve(serveCtx, lis, sc) }()

	agentCtx, stopAgents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgents()
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			if err := start(agentCtx, addr, i); err != nil && !errors.Is(err, context.Canceled) {
				c.logger.Warn("local agent ended", "index", i, "error", err)
			}
		})
	}
	res, runErr := c.Run(ctx)

	agentsDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(agentsDone)
	}()
	t := time.NewTimer(agentStopGrace)
	defer t.Stop()
	select {
	case <-agentsDone:
	case <-t.C:
		stopAgents()
		<-agentsDone
	}
	stopServe()
	if err := <-serveErr; err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}
