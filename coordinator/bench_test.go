package coordinator

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// benchReport builds a report with 8 metric histograms and 2 turn TTFT
// histograms (10 histograms) of realistic spread.
func benchReport(seq uint64, window uint32, seed int) *pb.ConnectRequest {
	r := &pb.Report{Seq: seq, WindowId: window, Counters: &pb.Counters{Requests: 200, InputTokens: 20000, OutputTokens: 40000}}
	enc := func(k int) *pb.SparseHistogram {
		h := hdr.Default.New()
		for i := range 200 {
			h.RecordValue(int64(1000 + (i*7919+k*104729+seed)%250000))
		}
		// As an agent sends it (agent/convert.go's sparseToPB).
		s := h.Sparse()
		return &pb.SparseHistogram{
			LowestMicros: s.Config.LowestMicros, HighestMicros: s.Config.HighestMicros, SignificantFigures: int32(s.Config.SigFigs),
			Counts: s.Counts, TotalCount: s.Total, Clamped: s.Clamped,
		}
	}
	for m := range 8 {
		r.Metrics = append(r.Metrics, &pb.MetricHistogram{Metric: pb.Metric(m + 1), Histogram: enc(m)})
	}
	for turn := 1; turn <= 2; turn++ {
		r.Turns = append(r.Turns, &pb.TurnStats{Turn: int32(turn), Ttft: enc(10 + turn), Requests: 100})
	}
	return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: r}}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocBytes returns the bytes the process has allocated so far.
func allocBytes() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// BenchmarkMergeReport measures the coordinator's own part of one
// 10-histogram report, without gRPC: converting the received message to
// the domain report and merging it into an open window.
func BenchmarkMergeReport(b *testing.B) {
	cfg := hdr.Default
	msgs := make([]*pb.ConnectRequest, 64)
	for i := range msgs {
		msgs[i] = benchReport(uint64(i+1), 1, i)
	}
	w := newWindow(1, 0, KindMeasure, time.Unix(0, 0), cfg)
	m := &member{id: "bench"}
	merge := func(msg *pb.ConnectRequest) {
		rep, err := messageFromPB(msg, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.apply(m, rep.(report).Window, nil); err != nil {
			b.Fatal(err)
		}
	}
	// One report first, so the pooled decoder is built before counting:
	// at -benchtime=20x its one-time allocation would dominate.
	merge(msgs[0])
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, alloc0 := cpuTime(), allocBytes()
	for n := range b.N {
		merge(msgs[n%len(msgs)])
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/report")
	b.ReportMetric(float64(allocBytes()-alloc0)/float64(b.N), "alloc-B/report")
}

// BenchmarkMerge100Agents plays 100 agents, each sending one report of 10
// histograms per "second" (iteration) over real loopback gRPC, and measures
// what the coordinator spends per report. The CPU figure is the whole
// process (the fake agents' encoding excluded: reports are built before the
// timer starts).
func BenchmarkMerge100Agents(b *testing.B) {
	const agents = 100
	c, err := New(Config{
		Agents: agents, Window: time.Hour, HeartbeatTimeout: time.Hour, Grace: time.Hour,
		Stages: []Stage{{Level: agents, Duration: time.Hour}}, StartDelay: time.Millisecond,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := c.NewServer(ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_, _ = c.Run(ctx)
	}()
	defer func() { cancel(); <-runDone }()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	cl := pb.NewCoordinatorServiceClient(cc)
	type fake struct {
		st     pb.CoordinatorService_ConnectClient
		window uint32
		acks   chan uint64
	}
	fakes := make([]*fake, agents)
	cfg := hdr.Default
	var ready sync.WaitGroup
	for i := range fakes {
		st, err := cl.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		err = st.Send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Hello{Hello: &pb.Hello{
			AgentId: fmt.Sprintf("bench-%d", i), Index: int32(i), Incarnation: 1,
			HistogramConfig:      &pb.HistogramConfig{LowestMicros: cfg.LowestMicros, HighestMicros: cfg.HighestMicros, SignificantFigures: int32(cfg.SigFigs)},
			HistogramFingerprint: cfg.Fingerprint(),
		}}})
		if err != nil {
			b.Fatal(err)
		}
		f := &fake{st: st, acks: make(chan uint64, 1024)}
		fakes[i] = f
		ready.Add(1)
		go func() {
			announced := false
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				switch v := m.GetMsg().(type) {
				case *pb.ConnectResponse_Welcome:
					// Epoch 0: the environment check against the spec passed.
					_ = st.Send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Ready{Ready: &pb.Ready{}}})
				case *pb.ConnectResponse_Assignment:
					_ = st.Send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Ready{Ready: &pb.Ready{Epoch: v.Assignment.GetEpoch()}}})
				case *pb.ConnectResponse_Phase:
					f.window = v.Phase.GetWindowId()
					if !announced {
						announced = true
						ready.Done()
					}
				case *pb.ConnectResponse_Ack:
					f.acks <- v.Ack.GetSeq()
				}
			}
		}()
	}
	ready.Wait()
	time.Sleep(50 * time.Millisecond) // let the window's start pass

	reports := make([][]*pb.ConnectRequest, agents)
	var wire int
	for i, f := range fakes {
		for n := range b.N {
			m := benchReport(uint64(n+1), f.window, i)
			reports[i] = append(reports[i], m)
			wire += proto.Size(m)
		}
	}
	b.ResetTimer()
	cpu0, alloc0 := cpuTime(), allocBytes()
	for n := range b.N {
		var wg sync.WaitGroup
		for i, f := range fakes {
			wg.Go(func() {
				if err := f.st.Send(reports[i][n]); err != nil {
					b.Error(err)
					return
				}
				for seq := range f.acks {
					if seq >= uint64(n+1) {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	total := float64(b.N * agents)
	b.ReportMetric(float64(cpuTime()-cpu0)/total, "cpu-ns/report")
	b.ReportMetric(float64(allocBytes()-alloc0)/total, "alloc-B/report")
	b.ReportMetric(float64(b.Elapsed())/total, "ns/report")
	b.ReportMetric(float64(wire)/total, "wire-bytes/report")
	b.ReportMetric(0, "ns/op")
}
