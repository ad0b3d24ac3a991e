package fleet

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// fakeScraper records when Begin and End were called; End returns a
// window spanning them.
type fakeScraper struct {
	mu    sync.Mutex
	begin time.Time
	calls []string
}

func (f *fakeScraper) Begin(context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begin = time.Now()
	f.calls = append(f.calls, "begin")
}

func (f *fakeScraper) End(context.Context) (servermetrics.Window, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "end")
	if f.begin.IsZero() {
		return servermetrics.Window{}, servermetrics.ErrNoWindow
	}
	return servermetrics.Window{Start: f.begin, End: time.Now()}, nil
}

// TestServerScrapeFollowsSpans checks that each stage's window is read
// over exactly its measured span, that an end moved earlier (a drain) is
// followed, and that stale spans of a delivered stage are ignored.
func TestServerScrapeFollowsSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeScraper{}
		d := newServerScrape(f, hclog.NewNullLogger())
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { d.run(ctx) })
		defer func() { cancel(); wg.Wait() }()

		t0 := time.Now()
		d.schedule(0, t0.Add(10*time.Second), t0.Add(70*time.Second))
		w := d.result(t.Context(), 0)
		if w == nil || !w.Start.Equal(t0.Add(10*time.Second)) || !w.End.Equal(t0.Add(70*time.Second)) {
			t.Fatalf("stage 0 window %+v, want 10s to 70s", w)
		}
		d.schedule(0, t0, t0.Add(time.Hour)) // stale: stage 0 is delivered

		t1 := time.Now()
		d.schedule(1, t1.Add(5*time.Second), t1.Add(60*time.Second))
		time.Sleep(20 * time.Second)
		d.schedule(1, t1.Add(5*time.Second), t1.Add(20*time.Second)) // drained early
		w = d.result(t.Context(), 1)
		if w == nil || !w.Start.Equal(t1.Add(5*time.Second)) || !w.End.Equal(t1.Add(20*time.Second)) {
			t.Fatalf("stage 1 window %+v, want 5s to 20s", w)
		}
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.calls) != 4 {
			t.Errorf("calls %v, want begin end begin end", f.calls)
		}
	})
}

// TestServerScrapeResultAfterStop checks that waiting for a stage that
// will never be read returns nil once the scraper stopped.
func TestServerScrapeResultAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newServerScrape(&fakeScraper{}, hclog.NewNullLogger())
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { d.run(ctx) })
		cancel()
		wg.Wait()
		if w := d.result(t.Context(), 3); w != nil {
			t.Errorf("result %+v, want nil", w)
		}
	})
}
