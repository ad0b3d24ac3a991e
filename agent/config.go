package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Defaults of Config's optional fields.
const (
	// DefaultReportInterval is how often the agent drains its recorder and
	// sends reports and a watermark.
	DefaultReportInterval = time.Second
	// DefaultHeartbeatInterval is used until the coordinator's Welcome says
	// otherwise.
	DefaultHeartbeatInterval = time.Second
	// DefaultCoordinatorTimeout is how long the agent keeps its load running
	// without hearing from the coordinator; then it stops sending new
	// turns. Long enough to ride out a stalled or briefly cut-off
	// coordinator (the soak stops it for 5 s), short enough that a dead
	// one does not leave the target loaded for long. An agent that did
	// stop tells the coordinator when it hears it again (a fatal problem:
	// its sessions are accounted as lost and move to the others).
	DefaultCoordinatorTimeout = 30 * time.Second
	// DefaultBackoffBase and DefaultBackoffMax bound the reconnect backoff.
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
	// DefaultWarmTimeout bounds Warmer.Warm.
	DefaultWarmTimeout = 10 * time.Second
)

// Config is an agent's configuration, read from flags.
type Config struct {
	// ID names the agent (pod name, host:pid); required.
	ID string
	// Index is the sharding index to ask for, or -1 to let the coordinator
	// choose.
	Index int
	// Capacity caps the sessions this agent runs; 0 means no cap.
	Capacity int
	// Version is reported in Hello.
	Version string
	// Coordinator is the coordinator's address (host:port).
	Coordinator string
	// Token is the shared secret; never logged.
	Token string
	// CAFile enables TLS, trusting the coordinator's certificate from it;
	// ServerName overrides the name checked. Empty CAFile dials in clear.
	CAFile, ServerName string
	// Histogram must match the coordinator's (default hdr.Default).
	Histogram hdr.Config

	ReportInterval     time.Duration
	CoordinatorTimeout time.Duration
	BackoffBase        time.Duration
	BackoffMax         time.Duration
	// DrainTimeout bounds how long a stopping engine waits for turns in
	// flight (default load.DefaultDrainTimeout).
	DrainTimeout time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReportInterval, DefaultReportInterval)
	def(&c.CoordinatorTimeout, DefaultCoordinatorTimeout)
	def(&c.BackoffBase, DefaultBackoffBase)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.DrainTimeout, load.DefaultDrainTimeout)
	if c.Histogram == (hdr.Config{}) {
		c.Histogram = hdr.Default
	}
	return c
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.ID == "" {
		bad("agent id: required")
	}
	if c.Coordinator == "" {
		bad("coordinator address: required")
	}
	if c.Index < -1 {
		bad("index %d: must be >= 0, or -1 to let the coordinator choose", c.Index)
	}
	if c.Capacity < 0 {
		bad("capacity %d: must be >= 0", c.Capacity)
	}
	if err := c.Histogram.Validate(); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"report interval": c.ReportInterval, "coordinator timeout": c.CoordinatorTimeout,
		"backoff base": c.BackoffBase, "backoff max": c.BackoffMax, "drain timeout": c.DrainTimeout} {
		if d < 0 {
			bad("%s %v: must be >= 0", name, d)
		}
	}
	return errors.Join(errs...)
}

// Spec is the workload and target of an assignment, as the coordinator
// sent it.
type Spec struct {
	Target string
	Model  string
	// Endpoint is "chat" or "completions" ("": chat).
	Endpoint string
	// APIKeyEnv names the environment variable with the target's API key,
	// read by each agent from its own environment ("": none).
	APIKeyEnv string
	// Workload is the whole workload, seed and output cap included.
	Workload workload.Config
	// SLO is the goodput objectives: the agent counts the requests that
	// meet them (record.Counters.Good). Zero: not measured.
	SLO result.SLO
	// KeyRequired says the target refuses requests without a key.
	KeyRequired bool
	// WorkerHeader names the response header of the serving worker
	// (client.Config.WorkerHeader).
	WorkerHeader string
}

// Assignment is what the coordinator asks this agent to run.
type Assignment struct {
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
	// TakeOver lists members lost since the last assignment and their
	// cursors (see shard.Indexer.TakeOver).
	TakeOver []TakeOver
}

// TakeOver is a lost member's index and the shard cursor of its last
// heartbeat.
type TakeOver struct {
	Index int
	From  int
}

// Target is what a Builder makes of a Spec: the conversations and the
// streamer to send them with, and extra engine options.
type Target struct {
	Source   workload.Source
	Streamer load.Streamer
	Options  []load.Option
	// Close, when set, is called once the stage's engine has stopped.
	Close func() error
}

// Builder turns a Spec into a Target; it is called once per stage, from
// the agent's own goroutine. cmd_agent wires it to pkg/client and
// pkg/workload; tests pass scripted ones.
type Builder func(ctx context.Context, spec Spec) (Target, error)

// Checker checks this agent's own environment against the run's spec as
// the agent joins (key variable, dataset, user model, the target's
// address) and returns what is wrong; a fatal problem keeps the agent from
// running. cmd_agent wires it to EnvChecker; without one nothing is
// checked.
type Checker func(ctx context.Context, spec Spec) []Problem

// Warmer is implemented by streamers that can open their connection pool
// ahead of the start, so the first turns do not pay for dialing.
type Warmer interface {
	Warm(ctx context.Context, conns int) error
}

// Dialer opens the network connection to the coordinator (tests wrap it
// to cut connections).
type Dialer func(ctx context.Context, addr string) (net.Conn, error)
