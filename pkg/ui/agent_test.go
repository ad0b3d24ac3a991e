package ui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestAgentHealthView(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type beat struct {
		after time.Duration // since t0
		h     Health
	}
	for _, tc := range []struct {
		name      string
		beats     []beat
		at        time.Duration // snapshot time since t0
		wantCPU   *float64
		wantStrm  *int64
		wantSess  *int64
		wantSince float64
	}{
		{name: "no heartbeat: nothing measured", at: time.Second},
		{
			name:  "one heartbeat: streams, no CPU yet",
			beats: []beat{{0, Health{CPU: 3 * time.Second, CPUOK: true, Streams: 12, Sessions: 40}}},
			at:    500 * time.Millisecond, wantStrm: ptr[int64](12), wantSess: ptr[int64](40), wantSince: 0.5,
		},
		{
			name: "two heartbeats: cores between them",
			beats: []beat{
				{0, Health{CPU: 3 * time.Second, CPUOK: true, Streams: 12, Sessions: 40}},
				{2 * time.Second, Health{CPU: 3*time.Second + 1500*time.Millisecond, CPUOK: true, Streams: 9, Sessions: 40}},
			},
			at: 2 * time.Second, wantCPU: ptr(0.75), wantStrm: ptr[int64](9), wantSess: ptr[int64](40),
		},
		{
			name: "cores over the agent's reading times, not the arrivals",
			beats: []beat{
				{0, Health{At: t0.Add(-time.Hour), CPU: time.Second, CPUOK: true}},
				{3 * time.Second, Health{At: t0.Add(-time.Hour + 4*time.Second), CPU: 3 * time.Second, CPUOK: true}},
			},
			at: 3 * time.Second, wantCPU: ptr(0.5), wantStrm: ptr[int64](0), wantSess: ptr[int64](0),
		},
		{
			name: "CPU went backwards (agent restarted): no figure until the next",
			beats: []beat{
				{0, Health{CPU: 30 * time.Second, CPUOK: true}},
				{time.Second, Health{CPU: time.Second, CPUOK: true, Streams: 1}},
			},
			at: time.Second, wantStrm: ptr[int64](1), wantSess: ptr[int64](0),
		},
		{
			name: "CPU not read: streams still shown",
			beats: []beat{
				{0, Health{Streams: 5, Sessions: 6}},
				{time.Second, Health{Streams: 7, Sessions: 6}},
			},
			at: time.Second, wantStrm: ptr[int64](7), wantSess: ptr[int64](6),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFeed()
			var now time.Time
			f.now = func() time.Time { return now }
			now = t0
			f.AgentCoverage("a-1", 1, false) // the agent is known without a heartbeat
			for _, b := range tc.beats {
				now = t0.Add(b.after)
				f.AgentHealth("a-1", b.h)
			}
			snap := f.Snapshot(t0.Add(tc.at))
			if len(snap.Agents) != 1 {
				t.Fatalf("agents = %d, want 1", len(snap.Agents))
			}
			a := snap.Agents[0]
			if !eqPtr(a.CPU, tc.wantCPU) || !eqPtr(a.Streams, tc.wantStrm) || !eqPtr(a.Sessions, tc.wantSess) {
				t.Errorf("cpu %v streams %v sessions %v, want %v %v %v",
					show(a.CPU), show(a.Streams), show(a.Sessions), show(tc.wantCPU), show(tc.wantStrm), show(tc.wantSess))
			}
			if a.LastHeartbeat != tc.wantSince {
				t.Errorf("last heartbeat %v s ago, want %v", a.LastHeartbeat, tc.wantSince)
			}
			// The page reads these names; absent figures are null, not 0.
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{`"cpu_cores":`, `"streams":`, `"sessions":`, `"last_heartbeat_s":`} {
				if !strings.Contains(string(b), key) {
					t.Errorf("%s lacks %s", b, key)
				}
			}
			if tc.wantCPU == nil && !strings.Contains(string(b), `"cpu_cores":null`) {
				t.Errorf("%s: CPU not measured should be null", b)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func show[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}
