package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// fakeSource is a workload.Source of conversations with a fixed number of
// turns: user turn k of conversation i says "c<i>-t<k>".
type fakeSource struct {
	turns int
	think time.Duration
	sys   string
	// next, when set, replaces Next.
	next func(ctx context.Context, c *fakeConv, k int, history []openai.Message) (workload.Turn, error)
}

func (s *fakeSource) Name() string { return "fake" }

func (s *fakeSource) Conversation(i int) workload.Conversation { return &fakeConv{src: s, idx: i} }

type fakeConv struct {
	src *fakeSource
	idx int
}

func (c *fakeConv) Index() int     { return c.idx }
func (c *fakeConv) System() string { return c.src.sys }
func (c *fakeConv) Turns() int     { return max(c.src.turns, 1) }
func (c *fakeConv) Next(ctx context.Context, k int, history []openai.Message) (workload.Turn, error) {
	if c.src.next != nil {
		return c.src.next(ctx, c, k, history)
	}
	if err := ctx.Err(); err != nil {
		return workload.Turn{}, err
	}
	t := workload.Turn{User: fmt.Sprintf("c%d-t%d", c.idx, k)}
	if k > 0 {
		t.ThinkTime = c.src.think
	}
	return t, nil
}

// fakeStreamer answers every request after a fixed time (the first token
// after ttft, the end after e2e) with "reply to <last user message>". It
// tracks how many requests are in flight. Under testing/synctest its sleeps
// run on the bubble's fake clock.
type fakeStreamer struct {
	ttft, e2e time.Duration
	// fail, when set, says which requests fail with which class.
	fail func(req *client.Request) client.Class

	inflight, peak atomic.Int64
	calls          atomic.Int64

	mu   sync.Mutex
	reqs []client.Request // copies, when keep is set
	keep bool
}

func (f *fakeStreamer) Stream(ctx context.Context, req *client.Request) *client.Result {
	f.calls.Add(1)
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if f.keep {
		cp := *req
		cp.Messages = append([]openai.Message(nil), req.Messages...)
		f.mu.Lock()
		f.reqs = append(f.reqs, cp)
		f.mu.Unlock()
	}
	res := &client.Result{Start: time.Now(), Status: 200}
	if f.fail != nil {
		if c := f.fail(req); c != client.ClassOK {
			res.Class, res.Err = c, fmt.Errorf("fake %s", c)
			return res
		}
	}
	t := time.NewTimer(f.e2e)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		res.E2E = time.Since(res.Start)
		res.Class, res.Err = client.ClassCancelled, ctx.Err()
		return res
	}
	res.TTFB, res.TTFT, res.E2E = f.ttft, f.ttft, time.Since(res.Start)
	res.Text = "reply to " + req.Messages[len(req.Messages)-1].Content
	res.OutputTokens, res.PromptTokens, res.UsageReported = 10, 100, true
	res.FinishReason = openai.FinishStop
	return res
}

// sampleLog keeps every sample the engine observed.
type sampleLog struct {
	mu      sync.Mutex
	samples []record.Sample
}

func (l *sampleLog) observe(s *record.Sample) {
	l.mu.Lock()
	cp := *s
	r := *s.Result
	cp.Result = &r
	l.samples = append(l.samples, cp)
	l.mu.Unlock()
}

func (l *sampleLog) all() []record.Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]record.Sample(nil), l.samples...)
}

// total merges every window the recorder holds into one.
func total(t *testing.T, rec *record.Recorder) *record.Window {
	t.Helper()
	all := record.NewWindow(0, hdr.Default)
	for _, w := range rec.Drain() {
		if err := all.Merge(w); err != nil {
			t.Fatalf("merge window %d: %v", w.ID, err)
		}
	}
	return all
}

func newEngine(t *testing.T, cfg Config, src workload.Source, s Streamer, opts ...Option) (*Engine, *record.Recorder) {
	t.Helper()
	rec := record.NewRecorder(hdr.Default)
	e, err := New(cfg, src, s, rec, nil, opts...)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	return e, rec
}
