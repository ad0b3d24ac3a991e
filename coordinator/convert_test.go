package coordinator

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// TestHeartbeatFromPB: the agent's health crosses the edge as a domain
// AgentHealth; a heartbeat without CPU time (an older agent, or one that
// cannot read it) says so rather than reading 0.
func TestHeartbeatFromPB(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   *pb.Heartbeat
		want AgentHealth
	}{
		{"full", &pb.Heartbeat{SentAt: timestamppb.New(at), ProcessCpuTime: durationpb.New(2500 * time.Millisecond), StreamsInFlight: 12, Sessions: 40},
			AgentHealth{At: at, CPU: 2500 * time.Millisecond, CPUOK: true, Streams: 12, Sessions: 40}},
		{"no CPU", &pb.Heartbeat{StreamsInFlight: 3, Sessions: 3}, AgentHealth{Streams: 3, Sessions: 3}},
		{"empty", &pb.Heartbeat{}, AgentHealth{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := messageFromPB(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Heartbeat{Heartbeat: tc.in}}, hdr.Default)
			if err != nil {
				t.Fatal(err)
			}
			hb, ok := m.(heartbeat)
			if !ok {
				t.Fatalf("got %T, want a heartbeat", m)
			}
			if !hb.Health.At.Equal(tc.want.At) {
				t.Errorf("read at %v, want %v", hb.Health.At, tc.want.At)
			}
			hb.Health.At, tc.want.At = time.Time{}, time.Time{}
			if hb.Health != tc.want {
				t.Errorf("health %+v, want %+v", hb.Health, tc.want)
			}
		})
	}
}
