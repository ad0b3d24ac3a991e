package coordinator

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// TestHeartbeatFromPB: the agent's health crosses the edge as a domain
// AgentHealth; a heartbeat without CPU time (an older agent, or one that
// cannot read it) says so rather than reading 0.
func TestHeartbeatFromPB(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *pb.Heartbeat
		want AgentHealth
	}{
		{"full", &pb.Heartbeat{ProcessCpuTime: durationpb.New(2500 * time.Millisecond), StreamsInFlight: 12, Sessions: 40},
			AgentHealth{CPU: 2500 * time.Millisecond, CPUOK: true, Streams: 12, Sessions: 40}},
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
			if hb.Health != tc.want {
				t.Errorf("health %+v, want %+v", hb.Health, tc.want)
			}
		})
	}
}
