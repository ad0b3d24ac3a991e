package coordinator

import (
	"bytes"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
)

// fullReport is a report with every field an agent fills.
func fullReport() *pb.ConnectRequest {
	req := benchReport(7, 3, 11)
	r := req.GetReport()
	r.Counters.Failed, r.Counters.FailedByClass = 3, map[string]int64{"timeout": 2, "http_5xx": 1}
	r.Counters.UsageMissing, r.Counters.Good = 1, 190
	r.FirstSend = timestamppb.New(time.Unix(1700000000, 123))
	r.LastEnd = timestamppb.New(time.Unix(1700000010, 456))
	r.Errors = []*pb.ErrorStat{
		{Class: "timeout", Message: "read: i/o timeout after N s", Example: "read: i/o timeout after 30 s", Count: 2, First: timestamppb.New(time.Unix(1700000003, 0))},
		{Class: "http_5xx", Message: "status N", Count: 1},
	}
	r.Workers = []*pb.WorkerStat{{Worker: "w0", Requests: 120, PromptTokens: 12000}, {Worker: "w1", Requests: 80, PromptTokens: 8000}}
	r.Turns[0].PromptTokens, r.Turns[0].CachedTokens, r.Turns[0].RequestsWithCache = 3100, 2900, 99
	r.Metrics[2].Histogram = nil // a metric without samples
	r.Metrics[3].Histogram.Clamped = 4
	return req
}

// countsReport is a report whose counters set every int64 count (one of
// them negative) and whose timestamps hold negative values.
func countsReport() *pb.ConnectRequest {
	req := benchReport(9, 4, 13)
	r := req.GetReport()
	c := r.Counters
	md := c.ProtoReflect().Descriptor()
	for i := range md.Fields().Len() {
		if fd := md.Fields().Get(i); fd.Kind() == protoreflect.Int64Kind && !fd.IsMap() {
			c.ProtoReflect().Set(fd, protoreflect.ValueOfInt64(int64(fd.Number())*1000+7))
		}
	}
	c.Dropped = -5
	r.FirstSend = &timestamppb.Timestamp{Seconds: -62135596800, Nanos: 999999999}
	r.LastEnd = &timestamppb.Timestamp{Seconds: 1700000010, Nanos: -1}
	return req
}

// decodeSeeds are wire forms of what agents send, and of what they must
// not.
func decodeSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	add := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	add(benchReport(1, 1, 0))
	add(fullReport())
	add(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: &pb.Report{}}})
	add(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Heartbeat{Heartbeat: &pb.Heartbeat{Sessions: 4}}})
	add(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Hello{Hello: &pb.Hello{AgentId: "a"}}})
	// An older agent's V2 field 2 in a metric: an unknown field.
	old := benchReport(2, 1, 0)
	mh := old.GetReport().Metrics[0]
	mh.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("v2")))
	add(old)
	// A report field given twice (protobuf merges the two).
	twice, _ := proto.Marshal(benchReport(3, 1, 0))
	seeds = append(seeds, append(bytes.Clone(twice), twice...))
	// More metric entries than decodeReport sizes slices for.
	many := &pb.Report{}
	for range maxFastMetrics + 1 {
		many.Metrics = append(many.Metrics, &pb.MetricHistogram{Metric: pb.Metric_METRIC_TTFT})
	}
	add(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: many}})
	add(countsReport())
	return seeds
}

// TestDecodeReportTakesAgentsReports checks that the reports agents send
// take decodeReport's path (a silent fall back to protobuf would only cost
// CPU) and come out as proto.Unmarshal makes them.
func TestDecodeReportTakesAgentsReports(t *testing.T) {
	for name, req := range map[string]*pb.ConnectRequest{
		"bench":  benchReport(1, 2, 3),
		"full":   fullReport(),
		"counts": countsReport(),
		"empty":  {Msg: &pb.ConnectRequest_Report{Report: &pb.Report{}}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			box := decodeReport(b)
			if box == nil {
				t.Fatal("decodeReport declined an agent's report")
			}
			if got := (&pb.ConnectRequest{Msg: &box.oneof}); !proto.Equal(got, req) {
				t.Fatalf("decoded %v\nwant %v", got, req)
			}
		})
	}
}

// TestDecodeReportDeclines checks the cases decodeReport leaves to
// protobuf: their unknown fields and merges must stay protobuf's.
func TestDecodeReportDeclines(t *testing.T) {
	seeds := decodeSeeds(t)
	for i, name := range map[int]string{3: "heartbeat", 4: "hello", 5: "unknown field", 6: "report twice", 7: "too many metrics"} {
		if decodeReport(seeds[i]) != nil {
			t.Errorf("%s: decodeReport took it", name)
		}
	}
}

// TestServerCodecOwnsItsBytes decodes a report split over two buffers,
// then overwrites them, as gRPC reuses them once Unmarshal returns: the
// decoded histograms must not change.
func TestServerCodecOwnsItsBytes(t *testing.T) {
	req := fullReport()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	a, c := bytes.Clone(b[:len(b)/2]), bytes.Clone(b[len(b)/2:])
	data := mem.BufferSlice{mem.SliceBuffer(a), mem.SliceBuffer(c)}
	var got pb.ConnectRequest
	if err := newServerCodec().Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	clear(a)
	clear(c)
	if !proto.Equal(&got, req) {
		t.Fatalf("decoded %v\nwant %v", &got, req)
	}
	if got.GetReport().GetMetrics()[0].GetHistogram().GetCounts() == nil {
		t.Fatal("no counts decoded")
	}
}

// FuzzDecodeReport checks decodeReport against proto.Unmarshal: whatever
// it takes must be a message proto.Unmarshal accepts and decodes the same.
func FuzzDecodeReport(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		box := decodeReport(in)
		if box == nil {
			return
		}
		var want pb.ConnectRequest
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatalf("decodeReport took what proto.Unmarshal refuses: %v", err)
		}
		got := &pb.ConnectRequest{Msg: &box.oneof}
		if !proto.Equal(got, &want) {
			t.Fatalf("decoded %v\nproto.Unmarshal %v", got, &want)
		}
		for _, h := range histograms(box) {
			if len(h.Counts) != cap(h.Counts) {
				t.Fatalf("counts of %d bytes have room for %d: an append would write into the message", len(h.Counts), cap(h.Counts))
			}
		}
	})
}

func histograms(box *reportBox) []*pb.SparseHistogram {
	var hs []*pb.SparseHistogram
	for _, m := range box.rep.GetMetrics() {
		if h := m.GetHistogram(); h != nil {
			hs = append(hs, h)
		}
	}
	for _, t := range box.rep.GetTurns() {
		if h := t.GetTtft(); h != nil {
			hs = append(hs, h)
		}
	}
	return hs
}

// BenchmarkDecodeReport decodes a 10-histogram report both ways.
func BenchmarkDecodeReport(b *testing.B) {
	wire, err := proto.Marshal(benchReport(1, 1, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decodeReport", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if decodeReport(bytes.Clone(wire)) == nil {
				b.Fatal("declined")
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m pb.ConnectRequest
			if err := proto.Unmarshal(wire, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodeReportFieldNumbers checks decodeReport's field numbers against
// the generated descriptors, so that a renumbered field in
// coordinator.proto fails here rather than decoding into the wrong field.
func TestDecodeReportFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		field string
		num   protowire.Number
	}{
		{&pb.ConnectRequest{}, "report", fieldConnectReport},
		{&pb.ConnectResponse{}, "ack", fieldResponseAck},
		{&pb.Ack{}, "seq", fieldAckSeq},
		{&pb.Report{}, "seq", fieldReportSeq},
		{&pb.Report{}, "window_id", fieldReportWindow},
		{&pb.Report{}, "metrics", fieldReportMetrics},
		{&pb.Report{}, "turns", fieldReportTurns},
		{&pb.Report{}, "counters", fieldReportCounters},
		{&pb.Report{}, "first_send", fieldReportFirstSend},
		{&pb.Report{}, "last_end", fieldReportLastEnd},
		{&pb.Report{}, "errors", fieldReportErrors},
		{&pb.Report{}, "workers", fieldReportWorkers},
		{&pb.MetricHistogram{}, "metric", fieldMetricMetric},
		{&pb.MetricHistogram{}, "histogram", fieldMetricHistogram},
		{&pb.SparseHistogram{}, "lowest_micros", fieldSparseLowest},
		{&pb.SparseHistogram{}, "highest_micros", fieldSparseHighest},
		{&pb.SparseHistogram{}, "significant_figures", fieldSparseSigFigs},
		{&pb.SparseHistogram{}, "counts", fieldSparseCounts},
		{&pb.SparseHistogram{}, "total_count", fieldSparseTotal},
		{&pb.SparseHistogram{}, "clamped", fieldSparseClamped},
		{&pb.TurnStats{}, "turn", fieldTurnTurn},
		{&pb.TurnStats{}, "ttft", fieldTurnTTFT},
		{&pb.TurnStats{}, "requests", fieldTurnRequests},
		{&pb.TurnStats{}, "prompt_tokens", fieldTurnPromptTokens},
		{&pb.TurnStats{}, "cached_tokens", fieldTurnCachedTokens},
		{&pb.TurnStats{}, "requests_with_cache", fieldTurnRequestsWithCache},
	} {
		md := tc.msg.ProtoReflect().Descriptor()
		fd := md.Fields().ByName(protoreflect.Name(tc.field))
		if fd == nil {
			t.Errorf("%s has no field %s", md.FullName(), tc.field)
			continue
		}
		if fd.Number() != tc.num {
			t.Errorf("%s.%s is field %d, decodeReport reads it as %d", md.FullName(), tc.field, fd.Number(), tc.num)
		}
	}
	// Every field of the messages decodeReport builds by hand is one it
	// reads: a new field would otherwise send every report to protobuf.
	for _, m := range []proto.Message{&pb.Report{}, &pb.MetricHistogram{}, &pb.SparseHistogram{}, &pb.TurnStats{}} {
		md := m.ProtoReflect().Descriptor()
		want := map[string]int{"Report": 9, "MetricHistogram": 2, "SparseHistogram": 6, "TurnStats": 6}[string(md.Name())]
		if n := md.Fields().Len(); n != want {
			t.Errorf("%s has %d fields, decodeReport knows %d: teach it the new ones", md.FullName(), n, want)
		}
	}
}

// TestServerCodecAcks checks that the codec writes an ack as proto.Marshal
// does (an agent decodes it with protobuf), and leaves other responses,
// and an ack carrying unknown fields, to the proto codec.
func TestServerCodecAcks(t *testing.T) {
	codec := newServerCodec()
	ackFor := func(seq uint64) *pb.ConnectResponse {
		r, err := responseToPB(ack{Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	odd := ackFor(9)
	odd.GetAck().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1))
	msgs := []*pb.ConnectResponse{odd, {Msg: &pb.ConnectResponse_Stop{Stop: &pb.Stop{Reason: "done"}}}}
	for _, seq := range []uint64{0, 1, 127, 128, 1 << 32, math.MaxUint64} {
		msgs = append(msgs, ackFor(seq))
	}
	for _, m := range msgs {
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); !bytes.Equal(b, want) {
			t.Errorf("%v: codec wrote % x, proto.Marshal % x", m, b, want)
		}
		got.Free()
		var back pb.ConnectResponse
		if err := proto.Unmarshal(want, &back); err != nil || !proto.Equal(&back, m) {
			t.Errorf("%v: decodes as %v (%v)", m, &back, err)
		}
	}
}

// BenchmarkAckMarshal converts and encodes an ack as the stream's sender
// does, through the server's codec and through the proto codec alone.
func BenchmarkAckMarshal(b *testing.B) {
	codec := newServerCodec()
	for name, marshal := range map[string]func(any) (mem.BufferSlice, error){
		"serverCodec": codec.Marshal,
		"proto":       codec.CodecV2.Marshal,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			seq := uint64(1)
			for b.Loop() {
				m, err := responseToPB(ack{Seq: seq})
				if err != nil {
					b.Fatal(err)
				}
				bs, err := marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				bs.Free()
				seq++
			}
		})
	}
}
