package client

import (
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
