package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/coordinator"
)

// ServeConfig is one coordinator run served to external agents. It is a
// plain value.
type ServeConfig struct {
	// Coordinator is the run: the agents to wait for, the spec, the stages
	// and the hooks.
	Coordinator coordinator.Config
	// Options are the coordinator's options (a metrics registerer).
	Options []coordinator.Option
	// Listen is the address to accept agents on.
	Listen string
	// Server is the gRPC side: the agents' token, TLS, and GracefulStop,
	// which bounds the wait for the agents to hang up once the run has
	// told them to stop (0: coordinator.Serve's default, 5 s).
	Server coordinator.ServerConfig
	// Losses, when set, reports agents gone for good, passed on to the
	// coordinator (Coordinator.AgentLost) so their sessions move at once.
	// It may stay open: Serve stops reading it when the run ends.
	Losses <-chan Loss
	// Live, when set, is the live dashboard (see Config.Live).
	Live *Live
}

// Serve creates the coordinator of sc, serves it on sc.Listen and runs it
// with the agents that join. It returns the run's result (with ctx's error
// when ctx ends first: the stage cut short is in it, marked Interrupted)
// once the server has stopped.
//
// The server outlives ctx: after an interrupt, Run still tells the agents
// to stop, and they must be reachable to hear it. Once Run has returned,
// the server stops gracefully: it waits for every agent stream to end,
// which an agent does when it has read its stop, and cuts the streams
// still open after sc.Server.GracefulStop. Every goroutine Serve starts
// has ended when it returns.
func Serve(ctx context.Context, logger hclog.Logger, sc ServeConfig) (*coordinator.Result, error) {
	ccfg := sc.Coordinator
	opts := sc.Live.wire(&ccfg, slices.Clip(sc.Options))
	co, err := coordinator.New(ccfg, logger, opts...)
	if err != nil {
		return nil, err
	}
	defer sc.Live.attach(co)()
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", sc.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen for agents: %w", err)
	}
	logger.Info("waiting for agents", "addr", lis.Addr().String(), "agents", sc.Coordinator.Agents, "tls", sc.Server.CertFile != "")
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	served := make(chan error, 1)
	go func() { served <- co.Serve(serveCtx, lis, sc.Server) }()

	lossCtx, stopLosses := context.WithCancel(ctx)
	waitLosses := forwardLosses(lossCtx, co, sc.Losses)
	res, runErr := co.Run(ctx)
	stopLosses()
	waitLosses()
	// Run told the agents to stop: the graceful stop lets the stop reach
	// them before the streams close.
	stopServe()
	if err := <-served; err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// forwardLosses tells co about every agent loss on losses until ctx ends;
// wait waits for that. losses may be nil.
func forwardLosses(ctx context.Context, co *coordinator.Coordinator, losses <-chan Loss) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case l := <-losses:
				// ErrRunOver or ctx's end: nothing is left to tell.
				_ = co.AgentLost(ctx, l.ID, l.Reason)
			}
		}
	}()
	return func() { <-done }
}
