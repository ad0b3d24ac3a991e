package result

import "time"

// Load is what a command knows about the load it measured, beside the
// window: the target, the workload and the load's settings. Its Facts
// method is the one place where they become a result's Facts, for the run
// command, the coordinator's stages and the sweep's points alike. It is a
// plain value.
type Load struct {
	// Target is the server's base URL; Model the model requested.
	Target, Model string
	// Workload names the conversation source; Version is fleetbench's.
	Workload, Version string
	// Label is vLLM's --label: the routing mode of a stage or a point.
	Label string
	// Backend is vLLM's backend name (BackendFor the endpoint).
	Backend string
	// Metadata are vLLM's --metadata pairs (see Facts.Metadata).
	Metadata map[string]string
	// MaxConcurrency is the closed loop's sessions, or the open loop's cap
	// on concurrent conversations (0: none).
	MaxConcurrency int
	// RequestRate is the open loop's configured rate (0: closed loop) and
	// Burstiness its gamma shape (0: not given).
	RequestRate, Burstiness float64
	// Percentiles are the extra percentiles (nil: DefaultPercentiles).
	Percentiles []float64
	// WorkerHeader is the --worker-header asked for ("": none).
	WorkerHeader string
}

// Facts returns the facts of a measurement from start to end whose
// throughputs are over d: the measured time, which is end - start unless
// windows in between were left out (re-run ones). The peaks and
// Interrupted are the caller's to set.
func (l Load) Facts(start, end time.Time, d time.Duration) Facts {
	return Facts{
		Duration: d, MaxConcurrency: l.MaxConcurrency, RequestRate: l.RequestRate, Burstiness: l.Burstiness,
		Model: l.Model, Label: l.Label, Backend: l.Backend, Metadata: l.Metadata, Target: l.Target, Workload: l.Workload, Version: l.Version,
		Start: start, End: end, Percentiles: l.Percentiles, WorkerHeader: l.WorkerHeader,
	}
}
