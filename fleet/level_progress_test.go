package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestTallyShowsWarmupErrors: errors of the warm-up count and show, with
// the latest one's class and message on one bounded line.
func TestTallyShowsWarmupErrors(t *testing.T) {
	tl := newTally()
	fail := func(window uint32, msg string) *record.Sample {
		return &record.Sample{Window: window, Result: &client.Result{Class: client.ClassConnect, Err: errors.New(msg)}}
	}
	tl.add(&record.Sample{Window: windowWarmUp, Result: &client.Result{TTFT: time.Millisecond}})
	tl.add(fail(windowWarmUp, "dial tcp 127.0.0.1:1:\nconnect: connection refused"))
	if tl.warmRequests != 1 || tl.warmErrs != 1 || tl.errors != 0 {
		t.Fatalf("warm-up tally %+v", tl)
	}
	if got := errText(tl.warmErrs, tl.lastErr); got != "1 errors (last: connect: dial tcp 127.0.0.1:1: connect: connection refused)" {
		t.Errorf("error text %q", got)
	}
	tl.add(fail(windowMeasure, strings.Repeat("x", 1000)))
	if tl.errors != 1 || len(tl.lastErr) > maxLastErr+3 || strings.Contains(tl.lastErr, "\n") {
		t.Errorf("measure errors %d, last %d bytes", tl.errors, len(tl.lastErr))
	}
	if errText(0, "") != "0 errors" {
		t.Error("no errors not said plainly")
	}
}
