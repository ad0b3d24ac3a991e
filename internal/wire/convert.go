package wire

import (
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// WorkloadToProto encodes w for an agent's assignment.
func WorkloadToProto(w workload.Config) *pb.WorkloadSpec {
	m := &pb.WorkloadSpec{
		Kind: w.Kind, Dataset: w.Dataset, Seed: w.Seed, MaxTokens: int32(w.MaxTokens),
		MinTurns: int32(w.Turns.Min), MaxTurns: int32(w.Turns.Max), SessionHeader: w.SessionHeader,
		Documents: int32(w.Documents), PromptTokens: int32(w.PromptTokens),
		MaxConversations: int32(w.MaxConversations), MinMessages: int32(w.MinMessages),
		Shuffle: w.Shuffle, OutputLen: w.OutputLen, NaturalStop: w.NaturalStop,
	}
	switch {
	case w.Think.Kind == workload.ThinkNone || w.Think.Mean <= 0:
	case w.Think.Kind == workload.ThinkExp:
		m.ThinkKind, m.ThinkMean = pb.ThinkKind_THINK_KIND_EXP, durationpb.New(w.Think.Mean)
	default:
		m.ThinkKind, m.ThinkMean = pb.ThinkKind_THINK_KIND_FIXED, durationpb.New(w.Think.Mean)
	}
	if um := w.UserModel; um != nil {
		m.UserModel = &pb.UserModel{Url: um.URL, Model: um.Model, ApiKeyEnv: um.APIKeyEnv}
	}
	return m
}

// WorkloadFromProto decodes an assignment's workload (WorkloadToProto's
// inverse). A nil message is the zero Config: the default docchat with
// seed 0 and no output cap.
func WorkloadFromProto(m *pb.WorkloadSpec) workload.Config {
	w := workload.Config{
		Kind: m.GetKind(), Dataset: m.GetDataset(), Seed: m.GetSeed(), MaxTokens: int(m.GetMaxTokens()),
		Turns:         workload.Turns{Min: int(m.GetMinTurns()), Max: int(m.GetMaxTurns())},
		SessionHeader: m.GetSessionHeader(), Documents: int(m.GetDocuments()), PromptTokens: int(m.GetPromptTokens()),
		MaxConversations: int(m.GetMaxConversations()), MinMessages: int(m.GetMinMessages()),
		Shuffle: m.GetShuffle(), OutputLen: m.GetOutputLen(), NaturalStop: m.GetNaturalStop(),
	}
	switch m.GetThinkKind() {
	case pb.ThinkKind_THINK_KIND_FIXED:
		w.Think = workload.ThinkTime{Kind: workload.ThinkFixed, Mean: m.GetThinkMean().AsDuration()}
	case pb.ThinkKind_THINK_KIND_EXP:
		w.Think = workload.ThinkTime{Kind: workload.ThinkExp, Mean: m.GetThinkMean().AsDuration()}
	}
	if um := m.GetUserModel(); um != nil {
		w.UserModel = &workload.UserModelConfig{URL: um.GetUrl(), Model: um.GetModel(), APIKeyEnv: um.GetApiKeyEnv()}
	}
	return w
}

// SLOToProto encodes goodput objectives; the zero SLO is nil (not
// measured).
func SLOToProto(s result.SLO) *pb.Slo {
	if s.IsZero() {
		return nil
	}
	m := &pb.Slo{}
	if s.TTFT > 0 {
		m.Ttft = durationpb.New(s.TTFT)
	}
	if s.TPOT > 0 {
		m.Tpot = durationpb.New(s.TPOT)
	}
	if s.E2EL > 0 {
		m.E2El = durationpb.New(s.E2EL)
	}
	return m
}

// SLOFromProto decodes SLOToProto's output; nil is the zero SLO.
func SLOFromProto(m *pb.Slo) result.SLO {
	if m == nil {
		return result.SLO{}
	}
	var s result.SLO
	if m.GetTtft() != nil {
		s.TTFT = m.GetTtft().AsDuration()
	}
	if m.GetTpot() != nil {
		s.TPOT = m.GetTpot().AsDuration()
	}
	if m.GetE2El() != nil {
		s.E2EL = m.GetE2El().AsDuration()
	}
	return s
}
