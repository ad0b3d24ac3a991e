package client

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// benchServer streams a 256-token chat response as fast as loopback allows.
func benchServer(tb testing.TB) *httptest.Server {
	var b strings.Builder
	b.WriteString(roleChunk())
	for range 255 {
		b.WriteString(chunk(" token", ""))
	}
	b.WriteString(chunk(" token", "stop") + usageChunk(100, 256, 32) + doneEvent)
	body := b.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// BenchmarkStream measures one 256-token streamed request end to end,
// client and loopback server together; allocations are both sides'.
func BenchmarkStream(b *testing.B) {
	srv := benchServer(b)
	c := mustNew(b, newConfig(srv.URL))
	req := userRequest("hello")
	b.ReportAllocs()
	for b.Loop() {
		if res := c.Stream(b.Context(), req); !res.OK() {
			b.Fatal(res.Err)
		}
	}
}

// BenchmarkStreamParallel runs Stream from GOMAXPROCS goroutines.
func BenchmarkStreamParallel(b *testing.B) {
	srv := benchServer(b)
	c := mustNew(b, newConfig(srv.URL))
	req := userRequest("hello")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := c.Stream(b.Context(), req); !res.OK() {
				b.Error(res.Err)
				return
			}
		}
	})
}

// BenchmarkTokenEvent measures what the client does with one token's SSE
// event once it is read: the JSON chunk and the measurement it records
// (no socket, no chunked framing, no scheduling).
func BenchmarkTokenEvent(b *testing.B) {
	ev := sse.Event{Data: []byte(strings.TrimSuffix(strings.TrimPrefix(chunk(" token", ""), "data: "), "\n\n"))}
	c := mustNew(b, newConfig("http://127.0.0.1:1"))
	st := c.states.Get().(*streamState)
	r := &run{c: c, res: &Result{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.event(st, ev, time.Now()); err != nil {
			b.Fatal(err)
		}
		if len(r.itl) >= 1024 { // a long answer's worth, then again
			r.itl = r.itl[:0]
			r.text.Reset()
		}
	}
}

// BenchmarkTokenEventStreams is BenchmarkTokenEvent over many streams at
// once, each token going to the next stream in turn, as an event loop
// serves thousands of streams: with 1 stream the state stays in the cache,
// with thousands each token finds its stream's run and decoder state out
// of the nearer caches. The difference is what the per-stream state's
// layout costs a token (docs/design.md: most of what fleetbench's loops
// spend beyond the epoll floor).
func BenchmarkTokenEventStreams(b *testing.B) {
	ev := sse.Event{Data: []byte(strings.TrimSuffix(strings.TrimPrefix(chunk(" token", ""), "data: "), "\n\n"))}
	c := mustNew(b, newConfig("http://127.0.0.1:1"))
	for _, n := range []int{1, 1000, 8000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			type stream struct {
				r  *run
				st *streamState
			}
			streams := make([]stream, n)
			for i := range streams {
				streams[i] = stream{r: &run{c: c, res: &Result{}, itl: make([]time.Duration, 0, 64)}, st: &streamState{rd: *sse.NewReader(nil, c.maxLine)}}
			}
			now := time.Now()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				s := &streams[i]
				if _, err := s.r.event(s.st, ev, now); err != nil {
					b.Fatal(err)
				}
				if len(s.r.itl) == cap(s.r.itl) { // a reply's worth, then the next
					s.r.itl = s.r.itl[:0]
					s.r.text.Reset()
				}
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
