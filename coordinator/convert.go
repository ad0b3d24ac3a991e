package coordinator

import (
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/internal/wire"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// Conversion between the generated protocol types and the domain types.
// This file and server.go are the only ones that see generated code.

func helloFromPB(h *pb.Hello) hello {
	cfg := h.GetHistogramConfig()
	return hello{
		ID: h.GetAgentId(), Index: int(h.GetIndex()), Capacity: int(h.GetCapacity()), Version: h.GetVersion(),
		Histogram: hdr.Config{
			LowestMicros: cfg.GetLowestMicros(), HighestMicros: cfg.GetHighestMicros(), SigFigs: int(cfg.GetSignificantFigures()),
		},
		Fingerprint: h.GetHistogramFingerprint(), Incarnation: h.GetIncarnation(),
	}
}

// messageFromPB converts an agent's message after Hello. Reports are
// decoded with cfg, the geometry the agent was admitted with.
func messageFromPB(m *pb.ConnectRequest, cfg hdr.Config) (any, error) {
	switch v := m.GetMsg().(type) {
	case *pb.ConnectRequest_Ready:
		return ready{Epoch: v.Ready.GetEpoch()}, nil
	case *pb.ConnectRequest_Started:
		return started{Window: v.Started.GetWindowId(), Offset: v.Started.GetOffset().AsDuration()}, nil
	case *pb.ConnectRequest_Report:
		return reportFromPB(v.Report, cfg), nil
	case *pb.ConnectRequest_Watermark:
		return watermark{Window: v.Watermark.GetWindowId(), Seq: v.Watermark.GetSeq(), Finished: v.Watermark.GetFinished(), Epoch: v.Watermark.GetEpoch()}, nil
	case *pb.ConnectRequest_Heartbeat:
		active := make([]int, len(v.Heartbeat.GetActiveConversations()))
		for i, c := range v.Heartbeat.GetActiveConversations() {
			active[i] = int(c)
		}
		hb := heartbeat{Active: active, Next: int(v.Heartbeat.GetNextConversation()), Health: AgentHealth{
			Streams: v.Heartbeat.GetStreamsInFlight(), Sessions: v.Heartbeat.GetSessions(),
		}}
		if ts := v.Heartbeat.GetSentAt(); ts != nil {
			hb.Health.At = ts.AsTime()
		}
		if c := v.Heartbeat.GetProcessCpuTime(); c != nil {
			hb.Health.CPU, hb.Health.CPUOK = c.AsDuration(), true
		}
		return hb, nil
	case *pb.ConnectRequest_Problem:
		p := v.Problem
		return problem{
			Step: p.GetStep(), Stage: int(p.GetStage()), Epoch: p.GetEpoch(), Class: p.GetClass(),
			Message: clip(p.GetMessage(), maxProblemMessage), Fatal: p.GetFatal(),
		}, nil
	case *pb.ConnectRequest_Hello:
		return nil, fmt.Errorf("convert message: hello after the stream opened")
	}
	return nil, fmt.Errorf("convert message: unknown message %T", m.GetMsg())
}

// reportFromPB converts a report, or returns a badReport when its shape
// is wrong (an unknown metric, one twice, a turn twice, fields this
// coordinator does not know): a bad report is refused alone, where failing
// the stream would make the agent resend it, or give up, and lose every
// later report too. Its histograms' contents are checked by the run loop
// as it merges them (see ingest), which refuses the report the same way.
func reportFromPB(r *pb.Report, cfg hdr.Config) any {
	w, hists, err := windowFromPB(r, cfg)
	if err != nil {
		return badReport{Seq: r.GetSeq(), Window: r.GetWindowId(), Err: err}
	}
	return report{Seq: r.GetSeq(), Window: w, Hists: hists}
}

// windowFromPB converts a report into a record.Window without its
// histograms, which it returns apart in sparse form, unchecked (a
// full-range histogram is hundreds of KB; absent ones are left out).
func windowFromPB(r *pb.Report, cfg hdr.Config) (*record.Window, []reportHist, error) {
	w := &record.Window{ID: r.GetWindowId(), Config: cfg, Turns: make(map[int]*record.TurnStats, len(r.GetTurns()))}
	hists := make([]reportHist, 0, len(r.GetMetrics())+len(r.GetTurns()))
	var seen [record.NumMetrics]bool
	for _, mh := range r.GetMetrics() {
		m := record.Metric(mh.GetMetric() - 1)
		if m < 0 || m >= record.NumMetrics {
			return nil, nil, fmt.Errorf("decode report %d: unknown metric %v", r.GetSeq(), mh.GetMetric())
		}
		if seen[m] {
			return nil, nil, fmt.Errorf("decode report %d: metric %s twice", r.GetSeq(), m)
		}
		seen[m] = true
		if err := knownFields(mh); err != nil {
			return nil, nil, fmt.Errorf("decode report %d %s: %w", r.GetSeq(), m, err)
		}
		if p := mh.GetHistogram(); p != nil {
			hists = append(hists, reportHist{metric: m, sparse: sparseFromPB(p)})
		}
	}
	for _, t := range r.GetTurns() {
		if err := knownFields(t); err != nil {
			return nil, nil, fmt.Errorf("decode report %d turn %d: %w", r.GetSeq(), t.GetTurn(), err)
		}
		i := record.TurnIndex(int(t.GetTurn()))
		if w.Turns[i] != nil {
			// An agent keys its turns by index: two of one index would
			// have to be summed or one dropped.
			return nil, nil, fmt.Errorf("decode report %d turn %d: turn index %d twice", r.GetSeq(), t.GetTurn(), i)
		}
		w.Turns[i] = &record.TurnStats{
			Requests: t.GetRequests(), PromptTokens: t.GetPromptTokens(),
			CachedTokens: t.GetCachedTokens(), RequestsWithCache: t.GetRequestsWithCache(),
		}
		if p := t.GetTtft(); p != nil {
			hists = append(hists, reportHist{isTurn: true, turn: int(t.GetTurn()), sparse: sparseFromPB(p)})
		}
	}
	c := r.GetCounters()
	w.Counters = record.Counters{
		Requests: c.GetRequests(), Failed: c.GetFailed(), InputTokens: c.GetInputTokens(),
		OutputTokens: c.GetOutputTokens(), CachedTokens: c.GetCachedTokens(), RequestsWithCache: c.GetRequestsWithCache(),
		UsageMissing: c.GetUsageMissing(), ConversationsStarted: c.GetConversationsStarted(),
		ConversationsCompleted: c.GetConversationsCompleted(), Restarted: c.GetRestarted(),
		Fallbacks: c.GetFallbacks(), LateSends: c.GetLateSends(), Dropped: c.GetDropped(), Good: c.GetGood(),
	}
	if len(c.GetFinishReasons()) > 0 {
		w.Counters.FinishReasons = maps.Clone(c.GetFinishReasons())
	}
	if len(c.GetWorkerHeaders()) > 0 {
		w.Counters.WorkerHeaders = maps.Clone(c.GetWorkerHeaders())
	}
	for k, v := range c.GetFailedByClass() {
		if w.Counters.FailedByClass == nil {
			w.Counters.FailedByClass = make(map[client.Class]int64)
		}
		w.Counters.FailedByClass[client.Class(k)] = v
	}
	if r.GetFirstSend() != nil {
		w.FirstSend = r.GetFirstSend().AsTime()
	}
	if r.GetLastEnd() != nil {
		w.LastEnd = r.GetLastEnd().AsTime()
	}
	es := make([]record.ErrorStat, 0, len(r.GetErrors()))
	for _, e := range r.GetErrors() {
		st := record.ErrorStat{Class: client.Class(e.GetClass()), Message: e.GetMessage(), Example: e.GetExample(), Count: e.GetCount()}
		if e.GetFirst() != nil {
			st.First = e.GetFirst().AsTime()
		}
		es = append(es, st)
	}
	w.AddErrors(es)
	if len(r.GetWorkers()) > 0 {
		ws := make(map[string]record.WorkerStat, len(r.GetWorkers()))
		for _, s := range r.GetWorkers() {
			c := ws[s.GetWorker()]
			c.Requests += s.GetRequests()
			c.PromptTokens += s.GetPromptTokens()
			ws[s.GetWorker()] = c
		}
		w.AddWorkers(ws)
	}
	return w, hists, nil
}

// sparseFromPB returns one of a report's histograms in sparse form,
// unchecked. The counts are kept without a copy: the message is the
// receiver's own.
func sparseFromPB(p *pb.SparseHistogram) hdr.Sparse {
	return hdr.Sparse{
		Config: hdr.Config{
			LowestMicros: p.GetLowestMicros(), HighestMicros: p.GetHighestMicros(), SigFigs: int(p.GetSignificantFigures()),
		},
		Counts: p.GetCounts(), Total: p.GetTotalCount(), Clamped: p.GetClamped(),
	}
}

// knownFields refuses a histogram's message that carries fields this
// coordinator does not know: an agent of another version may have put its
// counts there (the V2 compressed field 2 before SparseHistogram), and
// reading on would merge them as empty without a word.
func knownFields(m proto.Message) error {
	if n := len(m.ProtoReflect().GetUnknown()); n > 0 {
		return fmt.Errorf("%d bytes of fields this coordinator does not know (an agent of another fleetbench version?)", n)
	}
	return nil
}

// ackBox holds an ack's response, its oneof wrapper and the ack,
// allocated together.
type ackBox struct {
	resp  pb.ConnectResponse
	oneof pb.ConnectResponse_Ack
	ack   pb.Ack
}

// responseToPB converts an outbound domain message.
func responseToPB(m any) (*pb.ConnectResponse, error) {
	switch m := m.(type) {
	case welcome:
		return &pb.ConnectResponse{Msg: &pb.ConnectResponse_Welcome{Welcome: &pb.Welcome{
			Index: int32(m.Index), AckedSeq: m.Acked, HeartbeatInterval: durationpb.New(m.Heartbeat),
			Spec: specToPB(m.Spec),
		}}}, nil
	case assignment:
		members := make([]int32, len(m.Members))
		for i, x := range m.Members {
			members[i] = int32(x)
		}
		restart := make([]int64, len(m.Restart))
		for i, x := range m.Restart {
			restart[i] = int64(x)
		}
		var takeOver []*pb.TakeOver
		for _, t := range m.TakeOver {
			takeOver = append(takeOver, &pb.TakeOver{Index: int32(t.Index), NextConversation: int64(t.From)})
		}
		return &pb.ConnectResponse{Msg: &pb.ConnectResponse_Assignment{Assignment: &pb.Assignment{
			Epoch: m.Epoch, Index: int32(m.Index), Members: members,
			Spec:        specToPB(m.Spec),
			Concurrency: int32(m.Concurrency), Level: int32(m.Level), RequestRate: m.Rate, Mode: m.Mode,
			RestartConversations: restart, Stage: uint32(m.Stage), ConversationLimit: int64(m.Limit),
			TakeOver: takeOver,
		}}}, nil
	case phase:
		return &pb.ConnectResponse{Msg: &pb.ConnectResponse_Phase{Phase: &pb.Phase{
			WindowId: m.Window, Kind: kindToPB(m.Kind), StartAt: timestamppb.New(m.StartAt), Level: int32(m.Level), Mode: m.Mode,
		}}}, nil
	case ack:
		// One allocation for the three messages: an ack goes out for every
		// report.
		box := &ackBox{ack: pb.Ack{Seq: m.Seq}}
		box.oneof.Ack = &box.ack
		box.resp.Msg = &box.oneof
		return &box.resp, nil
	case stop:
		return &pb.ConnectResponse{Msg: &pb.ConnectResponse_Stop{Stop: &pb.Stop{Reason: m.Reason}}}, nil
	case heartbeat:
		return &pb.ConnectResponse{Msg: &pb.ConnectResponse_Heartbeat{Heartbeat: &pb.Heartbeat{SentAt: timestamppb.Now()}}}, nil
	}
	return nil, fmt.Errorf("convert message: unknown message %T", m)
}

// maxProblemMessage bounds the message of an agent's problem that the
// coordinator keeps and prints.
const maxProblemMessage = 1024

// clip cuts s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// specToPB encodes the run's spec for a welcome or an assignment.
func specToPB(s Spec) *pb.RunSpec {
	return &pb.RunSpec{
		Target: s.Target, Model: s.Model, Endpoint: s.Endpoint, ApiKeyEnv: s.APIKeyEnv,
		Workload: wire.WorkloadToProto(s.Workload), Slo: wire.SLOToProto(s.SLO), KeyRequired: s.KeyRequired,
		WorkerHeader: s.WorkerHeader,
	}
}

func kindToPB(k Kind) pb.PhaseKind {
	switch k {
	case KindWarmup:
		return pb.PhaseKind_PHASE_KIND_WARMUP
	case KindMeasure:
		return pb.PhaseKind_PHASE_KIND_MEASURE
	case KindDrain:
		return pb.PhaseKind_PHASE_KIND_DRAIN
	}
	return pb.PhaseKind_PHASE_KIND_UNSPECIFIED
}
