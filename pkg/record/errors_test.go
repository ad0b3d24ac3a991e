package record

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

func failed(class client.Class, server, err string, at time.Time) *Sample {
	r := &client.Result{Start: at, Class: class, ServerMessage: server}
	if err != "" {
		r.Err = errors.New(err)
	}
	return &Sample{Result: r}
}

// TestTopErrors: failures that differ only in ids and numbers are one
// error, counted, with the first one's time and a real example; the set
// stays bounded however many distinct messages arrive; merging windows
// (agents) sums them.
func TestTopErrors(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC)
	w := NewWindow(1, hdr.Default)
	for i := range 5 {
		w.Add(failed(client.ClassBadRequest, fmt.Sprintf("maximum context length is 1024 tokens. However, you requested %d tokens", 3000+i), "http 400", t0.Add(time.Duration(5-i)*time.Second)))
	}
	w.Add(failed(client.ClassConnect, "", "dial tcp 127.0.0.1:1: connection refused", t0))
	top := w.TopErrors(0)
	if len(top) != 2 || top[0].Class != client.ClassBadRequest || top[0].Count != 5 ||
		top[0].Message != "maximum context length is N tokens. However, you requested N tokens" ||
		!top[0].First.Equal(t0.Add(time.Second)) || top[0].Example != "maximum context length is 1024 tokens. However, you requested 3004 tokens" {
		t.Fatalf("top errors %+v", top)
	}
	// Bounded: many distinct messages fold into OtherErrors.
	for i := range 3 * MaxErrorKinds {
		w.Add(failed(client.ClassHTTP5xx, fmt.Sprintf("worker %c%c is down", 'a'+i%26, 'a'+i/26), "", t0))
	}
	if len(w.Errors) > MaxErrorKinds+2 {
		t.Errorf("%d kinds kept, want at most %d", len(w.Errors), MaxErrorKinds+2)
	}
	var other int64
	for _, e := range w.TopErrors(0) {
		if e.Message == OtherErrors {
			other += e.Count
		}
	}
	if other == 0 {
		t.Error("no failure counted under OtherErrors")
	}
	// Merge: another agent's window adds to the same error.
	o := NewWindow(1, hdr.Default)
	o.Add(failed(client.ClassBadRequest, "maximum context length is 1024 tokens. However, you requested 5000 tokens", "", t0))
	if err := w.Merge(o); err != nil {
		t.Fatal(err)
	}
	var merged ErrorStat
	for _, e := range w.TopErrors(0) {
		if e.Class == client.ClassBadRequest {
			merged = e
		}
	}
	if merged.Count != 6 || !merged.First.Equal(t0) {
		t.Errorf("merged %+v, want 6 from t0", merged)
	}
	if c := w.Clone(); len(c.Errors) != len(w.Errors) {
		t.Errorf("clone kept %d of %d kinds", len(c.Errors), len(w.Errors))
	}
}
