package ready

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Stage is one stage of the readiness gate, in the order they run.
type Stage string

// Stages of the gate.
const (
	StageHealth      Stage = "health"      // GET /health answers 200 (404: absent, skipped)
	StageModels      Stage = "models"      // GET /v1/models lists the model
	StageCompletions Stage = "completions" // K streamed completions in a row, stable TTFT
	StagePrime       Stage = "prime"       // N short multi-turn conversations complete
)

// Status is how a stage ended.
type Status string

// Stage statuses.
const (
	StatusPassed Status = "passed"
	StatusAbsent Status = "absent" // the endpoint does not exist (404); not waited for
	StatusFailed Status = "failed" // timed out or canceled
	StatusOff    Status = "off"    // turned off by configuration
)

// StageResult is what happened in one stage. Times are offsets from
// Report.Start.
type StageResult struct {
	Stage    Stage         `json:"stage"`
	Status   Status        `json:"status"`
	Started  time.Duration `json:"started_ns"`
	Ended    time.Duration `json:"ended_ns"`
	Attempts int           `json:"attempts"`
	// TTFTs are the completions stage's last K TTFTs when it passed, or the
	// last ones seen when it failed.
	TTFTs []time.Duration `json:"ttfts_ns,omitempty"`
	// Error is why the stage failed.
	Error string `json:"error,omitempty"`
}

// Report says when each stage of one readiness wait passed; reports print
// it next to the measurements that followed. It is owned by the goroutine
// that called the Gate until the call returns.
type Report struct {
	Start  time.Time     `json:"start"`
	Stages []StageResult `json:"stages"`
}

// Stage returns the result of stage s, if it ran.
func (r *Report) Stage(s Stage) (StageResult, bool) {
	for _, st := range r.Stages {
		if st.Stage == s {
			return st, true
		}
	}
	return StageResult{}, false
}

// Elapsed is the time from Start to the end of the last stage.
func (r *Report) Elapsed() time.Duration {
	if len(r.Stages) == 0 {
		return 0
	}
	return r.Stages[len(r.Stages)-1].Ended
}

// String summarizes the report on one line, e.g.
// "health passed at 1.2s, models passed at 20.5s, completions passed at 61s".
func (r *Report) String() string {
	parts := make([]string, 0, len(r.Stages))
	for _, st := range r.Stages {
		parts = append(parts, fmt.Sprintf("%s %s at %s", st.Stage, st.Status, st.Ended.Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// ErrNotReady is wrapped by every error that says the target did not become
// ready in time; errors.As with *StageError gives the stage.
var ErrNotReady = errors.New("target not ready")

// StageError is returned when a stage times out. Its message names what
// never became ready, e.g. "wait for readiness: /v1/models answered but
// completions failed for 2m0s: http status 503: ...". It is immutable.
type StageError struct {
	Stage   Stage
	Timeout time.Duration
	// Err is the last failure seen, if any.
	Err error
	msg string
}

// Error implements error.
func (e *StageError) Error() string { return "wait for readiness: " + e.msg }

// Unwrap returns the last failure.
func (e *StageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotReady) true.
func (e *StageError) Is(target error) bool { return target == ErrNotReady }
