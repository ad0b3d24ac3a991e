package agent

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// Domain messages of the protocol. conn.go and convert.go convert them to
// and from the generated types; nothing else in this package sees those.

// Kind is what a window is for.
type Kind int

// Window kinds.
const (
	KindWarmup Kind = iota + 1
	KindMeasure
	KindDrain
)

// Inbound (coordinator to agent).

type welcome struct {
	Index     int
	Acked     uint64
	Heartbeat time.Duration
	Spec      *Spec // nil from a coordinator that sends none
}

type phase struct {
	Window  uint32
	Kind    Kind
	StartAt time.Time
	Level   int
	Mode    string
}

type ack struct{ Seq uint64 }

type stop struct{ Reason string }

type heartbeatIn struct{}

// Outbound (agent to coordinator).

type hello struct {
	ID          string
	Index       int
	Capacity    int
	Version     string
	Incarnation uint64
}

type ready struct{ Epoch uint64 }

type started struct {
	Window uint32
	Offset time.Duration
}

type report struct {
	Seq    uint64
	Window *record.Window
}

type watermark struct {
	Window   uint32
	Seq      uint64
	Finished bool
	Epoch    uint64
}

// heartbeatOut carries the shard cursor and the conversations started or
// queued below it and not finished (see trackingIndexer.snapshot), and
// the agent's health: its process's CPU time so far (CPUOK false where it
// cannot be read) as read at At, its streams and its sessions.
type heartbeatOut struct {
	Active   []int
	Next     int
	At       time.Time
	CPU      time.Duration
	CPUOK    bool
	Streams  int64
	Sessions int64
}
