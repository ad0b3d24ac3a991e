package agent

import (
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/internal/wire"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// Conversion between the generated protocol types and the domain types.

func helloToPB(h hello, cfg hdr.Config) *pb.ConnectRequest {
	return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Hello{Hello: &pb.Hello{
		AgentId: h.ID, Index: int32(h.Index), Capacity: int32(h.Capacity), Version: h.Version,
		HistogramConfig: &pb.HistogramConfig{
			LowestMicros: cfg.LowestMicros, HighestMicros: cfg.HighestMicros, SignificantFigures: int32(cfg.SigFigs),
		},
		HistogramFingerprint: cfg.Fingerprint(), Incarnation: h.Incarnation,
	}}}
}

func welcomeFromPB(w *pb.Welcome) welcome {
	wl := welcome{Index: int(w.GetIndex()), Acked: w.GetAckedSeq(), Heartbeat: w.GetHeartbeatInterval().AsDuration()}
	if w.GetSpec() != nil {
		s := specFromPB(w.GetSpec())
		wl.Spec = &s
	}
	return wl
}

// specFromPB decodes the run's spec of a welcome or an assignment.
func specFromPB(s *pb.RunSpec) Spec {
	return Spec{
		Target: s.GetTarget(), Model: s.GetModel(), Endpoint: s.GetEndpoint(), APIKeyEnv: s.GetApiKeyEnv(),
		Workload: wire.WorkloadFromProto(s.GetWorkload()), SLO: wire.SLOFromProto(s.GetSlo()), KeyRequired: s.GetKeyRequired(),
		WorkerHeader: s.GetWorkerHeader(),
	}
}

// requestToPB converts an outbound message.
func requestToPB(m any) *pb.ConnectRequest {
	switch m := m.(type) {
	case ready:
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Ready{Ready: &pb.Ready{Epoch: m.Epoch}}}
	case started:
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Started{Started: &pb.Started{
			WindowId: m.Window, Offset: durationpb.New(m.Offset),
		}}}
	case report:
		r := reportToPB(m.Seq, m.Window)
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: r}}
	case watermark:
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Watermark{Watermark: &pb.Watermark{
			WindowId: m.Window, Seq: m.Seq, Finished: m.Finished, Epoch: m.Epoch,
		}}}
	case Problem:
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Problem{Problem: &pb.Problem{
			Step: m.Step, Stage: uint32(m.Stage), Epoch: m.Epoch, Class: m.Class, Message: m.Message, Fatal: m.Fatal,
		}}}
	case heartbeatOut:
		active := make([]int64, len(m.Active))
		for i, c := range m.Active {
			active[i] = int64(c)
		}
		at := m.At
		if at.IsZero() {
			at = time.Now()
		}
		hb := &pb.Heartbeat{
			SentAt: timestamppb.New(at), ActiveConversations: active, NextConversation: int64(m.Next),
			StreamsInFlight: m.Streams, Sessions: m.Sessions,
		}
		if m.CPUOK {
			hb.ProcessCpuTime = durationpb.New(m.CPU)
		}
		return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Heartbeat{Heartbeat: hb}}
	}
	panic(fmt.Sprintf("agent: no conversion for %T", m))
}

// reportToPB encodes one interval window as a protocol report, each
// non-empty histogram in sparse form.
func reportToPB(seq uint64, w *record.Window) *pb.Report {
	r := &pb.Report{Seq: seq, WindowId: w.ID}
	for m, h := range w.Hist {
		if h == nil || h.Count() == 0 {
			continue
		}
		r.Metrics = append(r.Metrics, &pb.MetricHistogram{Metric: pb.Metric(m + 1), Histogram: sparseToPB(h)})
	}
	for i, t := range w.Turns {
		ts := &pb.TurnStats{
			Turn: int32(i), Requests: t.Requests, PromptTokens: t.PromptTokens,
			CachedTokens: t.CachedTokens, RequestsWithCache: t.RequestsWithCache,
		}
		if t.TTFT != nil && t.TTFT.Count() > 0 {
			ts.Ttft = sparseToPB(t.TTFT)
		}
		r.Turns = append(r.Turns, ts)
	}
	c := w.Counters
	r.Counters = &pb.Counters{
		Requests: c.Requests, Failed: c.Failed, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		CachedTokens: c.CachedTokens, RequestsWithCache: c.RequestsWithCache, UsageMissing: c.UsageMissing,
		ConversationsStarted: c.ConversationsStarted, ConversationsCompleted: c.ConversationsCompleted,
		Restarted: c.Restarted, Fallbacks: c.Fallbacks, LateSends: c.LateSends, Dropped: c.Dropped, Good: c.Good,
		FinishReasons: maps.Clone(c.FinishReasons), WorkerHeaders: maps.Clone(c.WorkerHeaders),
	}
	if len(c.FailedByClass) > 0 {
		r.Counters.FailedByClass = make(map[string]int64, len(c.FailedByClass))
		for k, v := range c.FailedByClass {
			r.Counters.FailedByClass[string(k)] = v
		}
	}
	if !w.FirstSend.IsZero() {
		r.FirstSend = timestamppb.New(w.FirstSend)
	}
	if !w.LastEnd.IsZero() {
		r.LastEnd = timestamppb.New(w.LastEnd)
	}
	for name, s := range w.Workers {
		r.Workers = append(r.Workers, &pb.WorkerStat{Worker: name, Requests: s.Requests, PromptTokens: s.PromptTokens})
	}
	for _, e := range w.TopErrors(0) {
		pe := &pb.ErrorStat{Class: string(e.Class), Message: e.Message, Example: e.Example, Count: e.Count}
		if !e.First.IsZero() {
			pe.First = timestamppb.New(e.First)
		}
		r.Errors = append(r.Errors, pe)
	}
	return r
}

// sparseToPB encodes one histogram in the sparse form the coordinator
// merges without inflating anything (hdr.Sparse).
func sparseToPB(h *hdr.Histogram) *pb.SparseHistogram {
	s := h.Sparse()
	return &pb.SparseHistogram{
		LowestMicros: s.Config.LowestMicros, HighestMicros: s.Config.HighestMicros, SignificantFigures: int32(s.Config.SigFigs),
		Counts: s.Counts, TotalCount: s.Total, Clamped: s.Clamped,
	}
}

// responseFromPB converts a coordinator message.
func responseFromPB(m *pb.ConnectResponse) (any, error) {
	switch v := m.GetMsg().(type) {
	case *pb.ConnectResponse_Welcome:
		return welcomeFromPB(v.Welcome), nil
	case *pb.ConnectResponse_Assignment:
		a := v.Assignment
		members := make([]int, len(a.GetMembers()))
		for i, x := range a.GetMembers() {
			members[i] = int(x)
		}
		restart := make([]int, len(a.GetRestartConversations()))
		for i, x := range a.GetRestartConversations() {
			restart[i] = int(x)
		}
		var takeOver []TakeOver
		for _, t := range a.GetTakeOver() {
			takeOver = append(takeOver, TakeOver{Index: int(t.GetIndex()), From: int(t.GetNextConversation())})
		}
		return Assignment{
			Epoch: a.GetEpoch(), Stage: int(a.GetStage()), Index: int(a.GetIndex()), Members: members,
			Spec:        specFromPB(a.GetSpec()),
			Concurrency: int(a.GetConcurrency()), Level: int(a.GetLevel()), Rate: a.GetRequestRate(),
			Mode: a.GetMode(), Restart: restart, Limit: int(a.GetConversationLimit()), TakeOver: takeOver,
		}, nil
	case *pb.ConnectResponse_Phase:
		p := v.Phase
		var k Kind
		switch p.GetKind() {
		case pb.PhaseKind_PHASE_KIND_WARMUP:
			k = KindWarmup
		case pb.PhaseKind_PHASE_KIND_MEASURE:
			k = KindMeasure
		case pb.PhaseKind_PHASE_KIND_DRAIN:
			k = KindDrain
		default:
			return nil, fmt.Errorf("convert phase: unknown kind %v", p.GetKind())
		}
		return phase{Window: p.GetWindowId(), Kind: k, StartAt: p.GetStartAt().AsTime(), Level: int(p.GetLevel()), Mode: p.GetMode()}, nil
	case *pb.ConnectResponse_Ack:
		return ack{Seq: v.Ack.GetSeq()}, nil
	case *pb.ConnectResponse_Stop:
		return stop{Reason: v.Stop.GetReason()}, nil
	case *pb.ConnectResponse_Heartbeat:
		return heartbeatIn{}, nil
	}
	return nil, fmt.Errorf("convert message: unknown message %T", m.GetMsg())
}
