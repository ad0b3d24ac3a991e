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
	r.tok = &r.own
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.event(st, ev, time.Now()); err != nil {
			b.Fatal(err)
		}
		if len(r.tok.itl) >= 1024 { // a long answer's worth, then again
			r.own = tokens{itl: r.own.itl[:0], text: r.own.text[:0], chunks: 1}
		}
	}
}

// BenchmarkTokenEventStreams is BenchmarkTokenEvent over many streams at
// once, each token going to the next stream in turn, as an event loop
// serves thousands of streams: with 1 stream the state stays in the cache,
// with thousands each token finds its stream's run and decoder state out
// of the nearer caches. The difference is what the per-stream state's
// layout costs a token (docs/design.md: most of what fleetbench's loops
// spend beyond the epoll floor). path=event is the run's handling of the
// event (the blocking reads' path), path=fast the event loops' (fastToken,
// with the stream's shape learnt from its first token).
func BenchmarkTokenEventStreams(b *testing.B) {
	ev := sse.Event{Data: []byte(strings.TrimSuffix(strings.TrimPrefix(chunk(" token", ""), "data: "), "\n\n"))}
	c := mustNew(b, newConfig("http://127.0.0.1:1"))
	for _, path := range []string{"event", "fast"} {
		for _, n := range []int{1, 1000, 8000} {
			b.Run(fmt.Sprintf("path=%s/streams=%d", path, n), func(b *testing.B) {
				type stream struct {
					r    *run
					st   *streamState
					fast fastShape
				}
				streams := make([]stream, n)
				for i := range streams {
					s := &streams[i]
					s.r, s.st = &run{c: c, res: &Result{}}, &streamState{rd: *sse.NewReader(nil, c.maxLine)}
					s.r.tok = &s.r.own
					s.r.own.itl = make([]time.Duration, 0, 64)
					if _, err := s.r.event(s.st, ev, time.Now()); err != nil {
						b.Fatal(err)
					}
					s.fast.follow(&s.st.chunk.shape)
				}
				now := time.Now()
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					s := &streams[i]
					if path == "fast" {
						if !s.r.tok.fastToken(&s.fast, ev.Data, now) {
							b.Fatal("fastToken did not take the token")
						}
					} else if _, err := s.r.event(s.st, ev, now); err != nil {
						b.Fatal(err)
					}
					if t := s.r.tok; len(t.itl) == cap(t.itl) { // a reply's worth, then the next
						*t = tokens{itl: t.itl[:0], text: t.text[:0], chunks: 1}
					}
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}
