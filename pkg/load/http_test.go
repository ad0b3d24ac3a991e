package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// historyChecker remembers, per session id, the reply the scripted server
// streamed last, and fails a request whose history does not resend it.
type historyChecker struct {
	mu     sync.Mutex
	last   map[string]string
	checks int
}

func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{BaseURL: url, Model: "m"}, nil)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestHTTPHistoryResendsRealReplies(t *testing.T) {
	before := goroutinesWithLoops(t)
	hc := &historyChecker{last: map[string]string{}}
	s := &scripted{firstToken: 5 * time.Millisecond, gap: time.Millisecond, uniqueReplies: true,
		tokens: func(n int64) int { return 3 + int(n%5) }}
	s.check = func(req *openai.ChatCompletionRequest, r *http.Request) error {
		sid := r.Header.Get("X-Session-ID")
		if sid == "" {
			return fmt.Errorf("no session header")
		}
		msgs := req.Messages
		hc.mu.Lock()
		defer hc.mu.Unlock()
		want, seen := hc.last[sid]
		switch {
		case len(msgs) == 2: // system + first user turn
			if seen {
				return fmt.Errorf("session %s started twice", sid)
			}
		case !seen:
			return fmt.Errorf("session %s: %d messages but no earlier turn", sid, len(msgs))
		case msgs[len(msgs)-2].Role != openai.RoleAssistant || msgs[len(msgs)-2].Content != want:
			return fmt.Errorf("session %s resent %q, the server said %q", sid, msgs[len(msgs)-2].Content, want)
		default:
			hc.checks++
		}
		// The reply this request will get; n is the server's next count.
		n := s.n.Load()
		hc.last[sid] = s.reply(n, s.tokens(n))
		return nil
	}
	srv := httptest.NewServer(s)
	defer srv.Close()

	var log sampleLog
	e, rec := newEngine(t, Config{Concurrency: 1, TotalRequests: 12, SessionHeader: "X-Session-ID", Seed: 3},
		&fakeSource{turns: 4, sys: "system"}, newClient(t, srv.URL), WithObserver(log.observe))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	w := total(t, rec)
	if w.Counters.Requests != 12 || w.Counters.Failed != 0 {
		for _, s := range log.all() {
			if !s.Result.OK() {
				t.Logf("turn %d: %v %v", s.Turn, s.Result.Class, s.Result.Err)
			}
		}
		t.Fatalf("requests %d failed %d, want 12 and 0", w.Counters.Requests, w.Counters.Failed)
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.checks != 9 {
		t.Errorf("%d later turns checked by the server, want 9", hc.checks)
	}
	if w.Counters.ConversationsCompleted != 3 {
		t.Errorf("%d conversations completed, want 3", w.Counters.ConversationsCompleted)
	}
	if p := w.Hist[record.TTFT].Percentile(50); p < 5*time.Millisecond {
		t.Errorf("TTFT p50 %v below the server's 5ms", p)
	}
	srv.Close()
	waitGoroutines(t, before)
}

func TestHTTPClosedLoopCancelKeepsPartialResults(t *testing.T) {
	before := goroutinesWithLoops(t)
	// Replies take 20 tokens x 50 ms = 1 s; ctx ends at 1.5 s and the drain
	// gives up at 1.7 s, cancelling the second turns.
	s := &scripted{firstToken: 20 * time.Millisecond, gap: 50 * time.Millisecond, tokens: func(int64) int { return 20 }}
	srv := httptest.NewServer(s)
	defer srv.Close()
	e, rec := newEngine(t, Config{Concurrency: 20}, &fakeSource{turns: 3}, newClient(t, srv.URL),
		WithDrainTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	w := total(t, rec)
	if w.Counters.Requests != 20 {
		t.Errorf("%d turns completed, want the 20 first turns", w.Counters.Requests)
	}
	if c := w.Counters.FailedByClass[client.ClassCancelled]; c != 20 {
		t.Errorf("%d turns cancelled, want the 20 second turns (failed: %v)", c, w.Counters.FailedByClass)
	}
	if st := e.Stats(); st.InFlight != 0 || st.Sessions != 0 {
		t.Errorf("stats after Run: %+v", st)
	}
	srv.Close()
	waitGoroutines(t, before)
}

// waitGoroutines fails when goroutines started since before do not end.
// goroutinesWithLoops counts the goroutines once the client's event loops
// run: they are process-wide, as Go's poller is, and start with the first
// plain-HTTP client.
func goroutinesWithLoops(t *testing.T) int {
	t.Helper()
	newClient(t, "http://127.0.0.1:1")
	return runtime.NumGoroutine()
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left running, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
