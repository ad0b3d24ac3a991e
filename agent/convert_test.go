package agent

import (
	"testing"
	"time"
)

// TestHeartbeatToPB: a heartbeat carries the agent's health; CPU time
// that was not read is absent, not 0.
func TestHeartbeatToPB(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hb      heartbeatOut
		wantCPU time.Duration // -1: absent
	}{
		{"with CPU", heartbeatOut{Active: []int{3, 5}, Next: 7, At: time.Unix(1_700_000_000, 0), CPU: 1500 * time.Millisecond, CPUOK: true, Streams: 4, Sessions: 9}, 1500 * time.Millisecond},
		{"CPU not read", heartbeatOut{Streams: 2, Sessions: 2}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := requestToPB(tc.hb).GetHeartbeat()
			if got == nil {
				t.Fatal("not a heartbeat")
			}
			if got.GetStreamsInFlight() != tc.hb.Streams || got.GetSessions() != tc.hb.Sessions || got.GetNextConversation() != int64(tc.hb.Next) ||
				len(got.GetActiveConversations()) != len(tc.hb.Active) {
				t.Errorf("heartbeat %v, want %+v", got, tc.hb)
			}
			if !tc.hb.At.IsZero() && !got.GetSentAt().AsTime().Equal(tc.hb.At) {
				t.Errorf("sent at %v, want the reading's %v", got.GetSentAt().AsTime(), tc.hb.At)
			}
			switch {
			case tc.wantCPU < 0 && got.GetProcessCpuTime() != nil:
				t.Errorf("process CPU %v, want absent", got.GetProcessCpuTime())
			case tc.wantCPU >= 0 && got.GetProcessCpuTime().AsDuration() != tc.wantCPU:
				t.Errorf("process CPU %v, want %v", got.GetProcessCpuTime(), tc.wantCPU)
			}
		})
	}
}
