package coordinator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// fakeAgent is an agent's end of a Connect stream driven by hand, for
// tests and benchmarks that send reports of their own making: it says
// hello, answers the welcome and every assignment with ready, and hands
// over the window of each phase and the seq of each ack.
type fakeAgent struct {
	st     pb.CoordinatorService_ConnectClient
	sendMu sync.Mutex // a gRPC stream takes one sender at a time

	// windows receives the window id of every phase, acks the seq of
	// every ack; neither blocks the receiver (acks holds 1024).
	windows chan uint32
	acks    chan uint64
	// done is closed when the stream ends, stopped when the
	// coordinator says stop.
	done, stopped chan struct{}
}

// dialFake opens a stream as agent id with index i, recording with cfg,
// and starts its receiver, which runs until the stream ends.
func dialFake(ctx context.Context, cl pb.CoordinatorServiceClient, id string, i int, cfg hdr.Config) (*fakeAgent, error) {
	st, err := cl.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect fake agent: %w", err)
	}
	f := &fakeAgent{st: st, windows: make(chan uint32, 16), acks: make(chan uint64, 1024),
		done: make(chan struct{}), stopped: make(chan struct{})}
	err = f.send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Hello{Hello: &pb.Hello{
		AgentId: id, Index: int32(i), Incarnation: 1,
		HistogramConfig:      &pb.HistogramConfig{LowestMicros: cfg.LowestMicros, HighestMicros: cfg.HighestMicros, SignificantFigures: int32(cfg.SigFigs)},
		HistogramFingerprint: cfg.Fingerprint(),
	}}})
	if err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	go f.receive()
	return f, nil
}

func (f *fakeAgent) send(m *pb.ConnectRequest) error {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	return f.st.Send(m)
}

func (f *fakeAgent) receive() {
	defer close(f.done)
	for {
		m, err := f.st.Recv()
		if err != nil {
			return
		}
		switch v := m.GetMsg().(type) {
		case *pb.ConnectResponse_Welcome:
			// Epoch 0: the environment check against the spec passed.
			_ = f.send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Ready{Ready: &pb.Ready{}}})
		case *pb.ConnectResponse_Assignment:
			_ = f.send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Ready{Ready: &pb.Ready{Epoch: v.Assignment.GetEpoch()}}})
		case *pb.ConnectResponse_Phase:
			select {
			case f.windows <- v.Phase.GetWindowId():
			default:
			}
		case *pb.ConnectResponse_Ack:
			select {
			case f.acks <- v.Ack.GetSeq():
			default:
			}
		case *pb.ConnectResponse_Stop:
			select {
			case <-f.stopped:
			default:
				close(f.stopped)
			}
		}
	}
}

// waitAck waits for an ack of seq or later; false when the stream ended
// or ctx is done first.
func (f *fakeAgent) waitAck(ctx context.Context, seq uint64) bool {
	for {
		select {
		case got := <-f.acks:
			if got >= seq {
				return true
			}
		case <-f.done:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// sparseToPB is a histogram as an agent sends it (agent/convert.go's
// sparseToPB; this package cannot import the agent's).
func sparseToPB(h *hdr.Histogram) *pb.SparseHistogram {
	s := h.Sparse()
	return &pb.SparseHistogram{
		LowestMicros: s.Config.LowestMicros, HighestMicros: s.Config.HighestMicros, SignificantFigures: int32(s.Config.SigFigs),
		Counts: s.Counts, TotalCount: s.Total, Clamped: s.Clamped,
	}
}

// runOutcome is what Run returned, and when.
type runOutcome struct {
	res *Result
	err error
	at  time.Time
}

// serveRun serves c on a loopback port and runs it beside the test until
// ctx ends; it returns the address and where Run's outcome arrives.
func serveRun(t testing.TB, ctx context.Context, c *Coordinator) (string, <-chan runOutcome) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := c.NewServer(ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	ran := make(chan runOutcome, 1)
	go func() {
		res, err := c.Run(ctx)
		ran <- runOutcome{res, err, time.Now()}
	}()
	return lis.Addr().String(), ran
}

// joinFake connects one fake agent "a" to the coordinator at addr and
// waits for the window of its first phase.
func joinFake(t testing.TB, ctx context.Context, addr string) (*fakeAgent, uint32) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	fa, err := dialFake(ctx, pb.NewCoordinatorServiceClient(cc), "a", 0, hdr.Default)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-fa.windows:
		return fa, w
	case <-ctx.Done():
		t.Fatal("no phase")
		return nil, 0
	}
}
