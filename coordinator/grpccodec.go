package coordinator

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
)

// serverCodec is the coordinator server's gRPC codec: the standard proto
// codec, except that an agent's report is decoded by decodeReport. Through
// protobuf's generic path a report of ten histograms cost about 45
// allocations (every message, every repeated field's growth, a copy of
// every histogram's counts) and a fifth of the coordinator's CPU per
// report (BenchmarkMerge100Agents). decodeReport builds the same messages
// from one copy of the received bytes: the messages of each kind in one
// slice, the counts left where they lie in that copy.
type serverCodec struct{ encoding.CodecV2 }

// newServerCodec wraps the standard proto codec.
func newServerCodec() serverCodec {
	return serverCodec{encoding.GetCodecV2(grpcproto.Name)}
}

// Unmarshal decodes an agent's message into v. gRPC frees data when this
// returns, so a ConnectRequest is decoded from a copy of its own, which the
// histograms' counts keep.
func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*pb.ConnectRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	b := data.Materialize()
	if r := decodeReport(b); r != nil {
		proto.Reset(m)
		m.Msg = &r.oneof
		return nil
	}
	return proto.Unmarshal(b, m)
}

// Marshal encodes a message for an agent. An ack, sent for every report,
// is written by hand (the bytes proto.Marshal writes, TestServerCodecAcks),
// which spares protobuf's sizing and encoding walk; everything else goes to
// the proto codec.
func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*pb.ConnectResponse); ok {
		if a, ok := m.Msg.(*pb.ConnectResponse_Ack); ok && a.Ack != nil &&
			len(m.ProtoReflect().GetUnknown()) == 0 && len(a.Ack.ProtoReflect().GetUnknown()) == 0 {
			return mem.BufferSlice{mem.SliceBuffer(appendAck(nil, a.Ack.Seq))}, nil
		}
	}
	return c.CodecV2.Marshal(v)
}

// appendAck appends the wire form of a ConnectResponse holding Ack{Seq: seq}.
func appendAck(b []byte, seq uint64) []byte {
	size := 0
	if seq != 0 {
		size = protowire.SizeTag(fieldAckSeq) + protowire.SizeVarint(seq)
	}
	b = protowire.AppendTag(b, fieldResponseAck, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if seq != 0 {
		b = protowire.AppendTag(b, fieldAckSeq, protowire.VarintType)
		b = protowire.AppendVarint(b, seq)
	}
	return b
}

// reportBox holds a decoded report and the oneof wrapper that points to
// it, allocated together.
type reportBox struct {
	oneof pb.ConnectRequest_Report
	rep   pb.Report
}

// Field numbers decodeReport reads and Marshal writes (coordinator.proto).
const (
	fieldConnectReport = 4
	fieldResponseAck   = 4
	fieldAckSeq        = 1

	fieldReportSeq       = 1
	fieldReportWindow    = 2
	fieldReportMetrics   = 3
	fieldReportTurns     = 4
	fieldReportCounters  = 5
	fieldReportFirstSend = 6
	fieldReportLastEnd   = 7
	fieldReportErrors    = 8
	fieldReportWorkers   = 9

	fieldMetricMetric    = 1
	fieldMetricHistogram = 4

	fieldSparseLowest  = 1
	fieldSparseHighest = 2
	fieldSparseSigFigs = 3
	fieldSparseCounts  = 4
	fieldSparseTotal   = 5
	fieldSparseClamped = 6

	fieldTurnTurn              = 1
	fieldTurnTTFT              = 8
	fieldTurnRequests          = 4
	fieldTurnPromptTokens      = 5
	fieldTurnCachedTokens      = 6
	fieldTurnRequestsWithCache = 7
)

// Beyond these counts a report goes to proto.Unmarshal, which allocates a
// histogram message only for the histograms present: decodeReport sizes
// its slices by the counts, and a report of a million empty metrics must
// not cost more than protobuf's own decoding would. An agent sends one
// entry per metric (record.NumMetrics) and per turn index.
const (
	maxFastMetrics = 64
	maxFastTurns   = 1024
)

// decodeReport decodes b, the wire form of a ConnectRequest, when it is a
// report in the shape agents send, into messages equal (proto.Equal) to
// what proto.Unmarshal makes of it; the histograms' counts alias b. It
// returns nil for anything else, for proto.Unmarshal to decode (and refuse)
// as before: another message, a field it does not know or of another wire
// type, a message field given twice (which protobuf merges), a malformed
// encoding. FuzzDecodeReport checks it against proto.Unmarshal.
func decodeReport(b []byte) *reportBox {
	// The request must be the report field alone.
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fieldConnectReport || typ != protowire.BytesType {
		return nil
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil
	}
	metrics, turns, ok := countReport(body)
	if !ok || metrics > maxFastMetrics || turns > maxFastTurns {
		return nil
	}
	box := &reportBox{}
	box.oneof.Report = &box.rep
	r := &box.rep
	hists := make([]pb.SparseHistogram, 0, metrics+turns)
	if metrics > 0 {
		mhs := make([]pb.MetricHistogram, metrics)
		r.Metrics = make([]*pb.MetricHistogram, metrics)
		for i := range mhs {
			r.Metrics[i] = &mhs[i]
		}
	}
	if turns > 0 {
		ts := make([]pb.TurnStats, turns)
		r.Turns = make([]*pb.TurnStats, turns)
		for i := range ts {
			r.Turns[i] = &ts[i]
		}
	}
	mi, ti := 0, 0
	for len(body) > 0 {
		num, _, n := protowire.ConsumeTag(body)
		body = body[n:] // countReport checked every tag, wire type and value
		switch num {
		case fieldReportSeq, fieldReportWindow:
			v, n := protowire.ConsumeVarint(body)
			body = body[n:]
			if num == fieldReportSeq {
				r.Seq = v
			} else {
				r.WindowId = uint32(v)
			}
			continue
		}
		v, n := protowire.ConsumeBytes(body)
		body = body[n:]
		switch num {
		case fieldReportMetrics:
			if !decodeMetric(v, r.Metrics[mi], &hists) {
				return nil
			}
			mi++
		case fieldReportTurns:
			if !decodeTurn(v, r.Turns[ti], &hists) {
				return nil
			}
			ti++
		case fieldReportCounters:
			if r.Counters != nil {
				return nil
			}
			r.Counters = new(pb.Counters)
			if proto.Unmarshal(v, r.Counters) != nil {
				return nil
			}
		case fieldReportFirstSend, fieldReportLastEnd:
			ts := &r.FirstSend
			if num == fieldReportLastEnd {
				ts = &r.LastEnd
			}
			if *ts != nil {
				return nil
			}
			*ts = new(timestamppb.Timestamp)
			if proto.Unmarshal(v, *ts) != nil {
				return nil
			}
		case fieldReportErrors:
			e := new(pb.ErrorStat)
			if proto.Unmarshal(v, e) != nil {
				return nil
			}
			r.Errors = append(r.Errors, e)
		case fieldReportWorkers:
			w := new(pb.WorkerStat)
			if proto.Unmarshal(v, w) != nil {
				return nil
			}
			r.Workers = append(r.Workers, w)
		}
	}
	return box
}

// countReport checks that every field of the Report body b is one
// decodeReport reads, with its wire type, and counts the metrics and turns.
func countReport(b []byte) (metrics, turns int, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, false
		}
		b = b[n:]
		switch num {
		case fieldReportSeq, fieldReportWindow:
			if typ != protowire.VarintType {
				return 0, 0, false
			}
		case fieldReportMetrics, fieldReportTurns, fieldReportCounters, fieldReportFirstSend,
			fieldReportLastEnd, fieldReportErrors, fieldReportWorkers:
			if typ != protowire.BytesType {
				return 0, 0, false
			}
			switch num {
			case fieldReportMetrics:
				metrics++
			case fieldReportTurns:
				turns++
			}
		default:
			return 0, 0, false
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, 0, false
		}
		b = b[n:]
	}
	return metrics, turns, true
}

// walkFields walks the fields of message b: bytes for each length-delimited
// field, varint for each varint one. It returns false on a malformed field,
// a field of another wire type, or when a callback declines one.
func walkFields(b []byte, bytes func(protowire.Number, []byte) bool, varint func(protowire.Number, uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !bytes(num, v) {
				return false
			}
			b = b[n:]
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 || !varint(num, v) {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// decodeMetric decodes a MetricHistogram from b into m, its histogram into
// the next element of hists (whose capacity decodeReport sized).
func decodeMetric(b []byte, m *pb.MetricHistogram, hists *[]pb.SparseHistogram) bool {
	return walkFields(b, func(num protowire.Number, v []byte) bool {
		if num != fieldMetricHistogram || m.Histogram != nil {
			return false
		}
		m.Histogram = nextHist(hists)
		return m.Histogram != nil && decodeSparse(v, m.Histogram)
	}, func(num protowire.Number, v uint64) bool {
		m.Metric = pb.Metric(int32(v))
		return num == fieldMetricMetric
	})
}

// decodeTurn decodes a TurnStats from b into t, its TTFT histogram into
// the next element of hists.
func decodeTurn(b []byte, t *pb.TurnStats, hists *[]pb.SparseHistogram) bool {
	return walkFields(b, func(num protowire.Number, v []byte) bool {
		if num != fieldTurnTTFT || t.Ttft != nil {
			return false
		}
		t.Ttft = nextHist(hists)
		return t.Ttft != nil && decodeSparse(v, t.Ttft)
	}, func(num protowire.Number, v uint64) bool {
		switch num {
		case fieldTurnTurn:
			t.Turn = int32(v)
		case fieldTurnRequests:
			t.Requests = int64(v)
		case fieldTurnPromptTokens:
			t.PromptTokens = int64(v)
		case fieldTurnCachedTokens:
			t.CachedTokens = int64(v)
		case fieldTurnRequestsWithCache:
			t.RequestsWithCache = int64(v)
		default:
			return false
		}
		return true
	})
}

// nextHist takes the next element of hists, nil when its capacity is
// spent (more histograms than metrics and turns: not a report's shape).
func nextHist(hists *[]pb.SparseHistogram) *pb.SparseHistogram {
	h := *hists
	if len(h) == cap(h) {
		return nil
	}
	*hists = h[:len(h)+1]
	return &(*hists)[len(h)]
}

// decodeSparse decodes a SparseHistogram from b into h; its counts alias b.
func decodeSparse(b []byte, h *pb.SparseHistogram) bool {
	return walkFields(b, func(num protowire.Number, v []byte) bool {
		// The last occurrence wins, as protobuf has it. The capacity is
		// cut so that nothing appended to the counts can reach b.
		h.Counts = v[:len(v):len(v)]
		return num == fieldSparseCounts
	}, func(num protowire.Number, v uint64) bool {
		switch num {
		case fieldSparseLowest:
			h.LowestMicros = int64(v)
		case fieldSparseHighest:
			h.HighestMicros = int64(v)
		case fieldSparseSigFigs:
			h.SignificantFigures = int32(v)
		case fieldSparseTotal:
			h.TotalCount = int64(v)
		case fieldSparseClamped:
			h.Clamped = int64(v)
		default:
			return false
		}
		return true
	})
}
