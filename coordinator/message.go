package coordinator

import (
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// Kind is what a window is for.
type Kind int

// Window kinds.
const (
	KindWarmup Kind = iota + 1
	KindMeasure
	KindDrain
)

// String returns "warmup", "measure" or "drain".
func (k Kind) String() string {
	switch k {
	case KindWarmup:
		return "warmup"
	case KindMeasure:
		return "measure"
	case KindDrain:
		return "drain"
	}
	return "unknown"
}

// The domain messages of the protocol. The gRPC edge (server.go,
// convert.go) converts the generated types to and from these; nothing else
// in this package sees a generated type.

// hello is an agent's first message.
type hello struct {
	ID          string
	Index       int // -1: coordinator chooses
	Capacity    int
	Version     string
	Histogram   hdr.Config
	Fingerprint string
	Incarnation uint64
}

// ready says an agent applied the assignment of Epoch; Epoch 0 says it
// checked its environment against the welcome's spec and can run.
type ready struct{ Epoch uint64 }

// problem is an agent's word that it cannot run (Fatal) or runs with a
// warning: where (Step "join", "build" or "run"), which stage and epoch,
// the error's class and its redacted message.
type problem struct {
	Step    string
	Stage   int
	Epoch   uint64
	Class   string
	Message string
	Fatal   bool
}

type started struct {
	Window uint32
	Offset time.Duration
}

// report is one agent's interval data of one window. Its histograms
// arrive as Hists, not yet checked: the run loop checks each in the walk
// that merges it into the window and refuses the report whole if one is
// malformed (see ingest). Window's histograms are nil until then, and set
// to the checked ones once merged.
type report struct {
	Seq    uint64
	Window *record.Window
	Hists  []reportHist
}

// reportHist is one histogram of a report as received: the metric it
// belongs to, or the turn whose TTFT it is, and its sparse form.
type reportHist struct {
	metric record.Metric
	isTurn bool
	turn   int // the turn number as the report gives it, when isTurn
	sparse hdr.Sparse
}

// name is how errors name the histogram: its metric, or "turn N".
func (h reportHist) name() string {
	if h.isTurn {
		return fmt.Sprintf("turn %d", h.turn)
	}
	return h.metric.String()
}

// badReport is a report the gRPC edge could not decode (a malformed
// histogram, a geometry other than the agent's, an unknown metric): the
// run loop merges none of it but acks it, so that one bad report costs
// its own data and nothing else.
type badReport struct {
	Seq    uint64
	Window uint32
	Err    error
}

type watermark struct {
	Window   uint32
	Seq      uint64
	Finished bool
	Epoch    uint64
}

// heartbeat carries, from agents, the conversations running or queued and
// the shard cursor they were read with, and the agent's health.
type heartbeat struct {
	Active []int
	Next   int
	Health AgentHealth
}

// AgentHealth is an agent's health as its heartbeat tells it.
type AgentHealth struct {
	// At is when the agent read it, by the agent's clock (zero: not
	// said): two readings' interval, whatever the delays on the way.
	At time.Time
	// CPU is the agent process's CPU time so far, user and system; CPUOK
	// is false when the agent could not read it (or did not say).
	CPU   time.Duration
	CPUOK bool
	// Streams is the requests the agent is streaming, Sessions the
	// conversations it runs.
	Streams  int64
	Sessions int64
}

// Outbound messages.

type welcome struct {
	Index     int
	Acked     uint64
	Heartbeat time.Duration
	Spec      Spec
}

type assignment struct {
	Epoch       uint64
	Stage       int
	Index       int
	Members     []int
	Spec        Spec
	Concurrency int
	Level       int
	Rate        float64
	Mode        string
	Restart     []int
	Limit       int
	TakeOver    []takeOver
}

// takeOver is a lost member's index and the shard cursor of its last
// heartbeat.
type takeOver struct {
	Index int
	From  int
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
