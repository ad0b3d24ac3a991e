package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pooledLoopConn reports whether c's idle connections are on an event loop.
func pooledLoopConn(t *testing.T, c *Client) bool {
	t.Helper()
	c.h1.pool.mu.Lock()
	defer c.h1.pool.mu.Unlock()
	if len(c.h1.pool.idle) == 0 {
		t.Fatal("no idle connection after a successful stream")
	}
	return c.h1.pool.idle[0].lc != nil
}

// TestStreamOnEventLoop checks that plain-HTTP streams are read by the
// event loops unless BlockingReads is set, with the same measurements:
// the tokens' text, one ITL per later token, and the connection reused.
func TestStreamOnEventLoop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{roleChunk(), chunk("a", ""), chunk("b", ""), chunk("c", "stop"), doneEvent} {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
	}))
	defer srv.Close()
	for _, blocking := range []bool{false, true} {
		cfg := newConfig(srv.URL)
		cfg.BlockingReads = blocking
		c := mustNew(t, cfg)
		for i := range 2 {
			res := c.Stream(t.Context(), userRequest("hi"))
			if !res.OK() || res.Text != "abc" || len(res.ITL) != 2 || res.TTFT <= 0 || res.E2E < res.TTFT {
				t.Fatalf("blocking %t, request %d: %+v", blocking, i, res)
			}
			if res.ITL[0] < 4*time.Millisecond {
				t.Errorf("blocking %t: ITL %v, want the server's 5 ms gap", blocking, res.ITL[0])
			}
			if i == 1 && !res.ConnReused {
				t.Errorf("blocking %t: the second request dialled again", blocking)
			}
		}
		if got := pooledLoopConn(t, c); got == blocking {
			t.Errorf("blocking %t: connection on an event loop = %t", blocking, got)
		}
	}
}

// TestLoopWriteWaitsForRoom sends a request larger than the socket
// buffers to a server that reads it only after a pause: the write must
// wait for room (EPOLLOUT) and the stream then succeed, on a connection
// that stays reusable.
func TestLoopWriteWaitsForRoom(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		n, _ := io.Copy(io.Discard, r.Body)
		writeEvents(chunk(strings.Repeat("x", int(n%7)+1), "stop"), doneEvent)(w, r)
	}))
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	big := strings.Repeat("long prompt ", 2<<20) // 24 MB
	for i := range 2 {
		res := c.Stream(t.Context(), userRequest(big))
		if !res.OK() {
			t.Fatalf("request %d: %v", i, res.Err)
		}
		if i == 1 && !res.ConnReused {
			t.Error("the connection was not reused after a request that filled the socket")
		}
	}
	if !*blockingReads && !pooledLoopConn(t, c) {
		t.Error("the connection left the event loop")
	}
}

// TestLoopHandsBackOtherReplies checks a reply the loops do not read (an
// error with a length, then a 200 with a length) going back to Go's
// poller: the status and message as on the blocking path.
func TestLoopHandsBackOtherReplies(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
			return
		}
		body := chunk("z", "stop") + doneEvent
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	res := c.Stream(t.Context(), userRequest("hi"))
	if res.Class != ClassRateLimited || res.Status != http.StatusTooManyRequests || !strings.Contains(res.ServerMessage, "slow down") {
		t.Fatalf("429: class %q status %d message %q err %v", res.Class, res.Status, res.ServerMessage, res.Err)
	}
	res = c.Stream(t.Context(), userRequest("hi"))
	if !res.OK() || res.Text != "z" {
		t.Fatalf("200 with a length: %+v", res)
	}
}
