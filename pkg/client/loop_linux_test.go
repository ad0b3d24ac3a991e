package client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
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
			// The server writes 5 ms apart; timer jitter moves each gap,
			// not their sum by much.
			if sum := res.ITL[0] + res.ITL[1]; sum < 5*time.Millisecond {
				t.Errorf("blocking %t: ITL %v, want about the server's two 5 ms gaps", blocking, res.ITL)
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

// rawReplies serves each connection's requests with the raw replies given,
// one per request, reading each request's head and Content-Length body
// first; a reply ending in close is followed by closing the connection.
func rawReplies(t *testing.T, replies ...func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for _, reply := range replies {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			reply(c)
		}
		_, _ = io.Copy(io.Discard, br) // hold the connection open
	})
	return "http://" + ln.Addr().String()
}

// TestLoopBareLFHeads checks heads that end their lines in a bare LF,
// which net/http accepts: they go back to the blocking path at once
// instead of waiting for a CRLF CRLF that never comes. A keep-alive 429
// is reported without waiting for the context; a close-delimited stream
// keeps each token's own time.
func TestLoopBareLFHeads(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	url := rawReplies(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\nContent-Type: application/json\nContent-Length: 37\n\n{\"error\":{\"message\":\"slow down now\"}}")
	})
	c := mustNew(t, newConfig(url))
	start := time.Now()
	res := c.Stream(ctx, userRequest("hi"))
	if res.Class != ClassRateLimited || time.Since(start) > 5*time.Second {
		t.Fatalf("bare-LF 429: class %q err %v after %v", res.Class, res.Err, time.Since(start))
	}

	url = rawReplies(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\nContent-Type: text/event-stream\nConnection: close\n\n")
		for _, e := range []string{chunk("a", ""), chunk("b", ""), chunk("c", "stop"), doneEvent} {
			_, _ = io.WriteString(c, e)
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	})
	c = mustNew(t, newConfig(url))
	res = c.Stream(ctx, userRequest("hi"))
	// The server writes the tokens 20 ms apart: read as they come, the two
	// gaps add up to about 40 ms (timer jitter moves each), where bytes
	// held back and stamped at once would give about none.
	if !res.OK() || res.Text != "abc" || len(res.ITL) != 2 || res.ITL[0]+res.ITL[1] < 20*time.Millisecond {
		t.Fatalf("bare-LF close-delimited stream: %+v", res)
	}
}

// TestLoopAnsweredWhileWriting: the server streams its whole answer while
// the client is still writing a request larger than the socket buffers,
// then reads the rest. The stream succeeds, and the connection, if it is
// pooled, must not keep a write interest: level triggered, it would wake
// its loop for ever (the process's CPU is checked while it is idle).
func TestLoopAnsweredWhileWriting(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeEvents(chunk("x", "stop"), doneEvent)(w, r)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	res := c.Stream(t.Context(), userRequest(strings.Repeat("long prompt ", 2<<20)))
	if !res.OK() || res.Text != "x" {
		t.Fatalf("stream: %+v", res)
	}
	c.h1.pool.mu.Lock()
	for _, pc := range c.h1.pool.idle {
		if pc.lc != nil {
			pc.lc.mu.Lock()
			out := pc.lc.out
			pc.lc.mu.Unlock()
			if out {
				t.Error("a pooled connection kept its write interest")
			}
		}
	}
	c.h1.pool.mu.Unlock()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	time.Sleep(300 * time.Millisecond)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	used := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	t.Logf("CPU while idle: %v in 300 ms", used)
	if used > 150*time.Millisecond {
		t.Errorf("the process used %v of CPU in 300 ms of idling: a loop spins", used)
	}
}

// TestLoopFinishDropsWriteInterest: an exchange that ends while its writer
// waits for room (the server answered first) leaves no write interest on
// the connection. Level triggered, a writable socket would otherwise wake
// its loop on every wait for as long as the connection lives.
func TestLoopFinishDropsWriteInterest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	lc := detach(conn)
	if lc == nil {
		t.Fatal("the connection did not go to a loop")
	}
	defer lc.close()
	x := &lc.ex
	lc.mu.Lock()
	lc.x, x.wake = x, make(chan struct{}, 1)
	x.wantOut = true
	lc.setInterest(true) // as waitWritable does
	if !lc.out {
		lc.mu.Unlock()
		t.Fatal("write interest not set")
	}
	lc.finish(x, phDone)
	out := lc.out
	lc.mu.Unlock()
	if out {
		t.Error("the exchange ended with the write interest still set")
	}
}

// TestLoopSplitReads sends one streamed reply in two writes, split at
// every byte, with a pause between them so that the loop reads each part
// on its own: the head, the chunk framing, an event's lines and the
// chunk's closing CRLF are each cut somewhere. Every request must read the
// same text and chunks, and leave its connection reusable (with
// -blocking-reads, the same on the blocking path).
func TestLoopSplitReads(t *testing.T) {
	events := []string{roleChunk(), chunk("a", ""), chunk("b", ""), chunk("c", "stop"), doneEvent}
	var body strings.Builder
	for _, e := range events {
		body.WriteString(strconv.FormatInt(int64(len(e)), 16) + "\r\n" + e + "\r\n")
	}
	reply := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		body.String() + "0\r\n\r\n"
	replies := make([]func(net.Conn), len(reply)-1)
	for i := range replies {
		at := i + 1
		replies[i] = func(c net.Conn) {
			_, _ = io.WriteString(c, reply[:at])
			time.Sleep(time.Millisecond)
			_, _ = io.WriteString(c, reply[at:])
		}
	}
	c := mustNew(t, newConfig(rawReplies(t, replies...)))
	for i := range replies {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		res := c.Stream(ctx, userRequest("hi"))
		cancel()
		if !res.OK() || res.Text != "abc" || res.OutputTokens != 3 || len(res.ITL) != 2 || res.FinishReason != "stop" {
			t.Fatalf("split after byte %d of %d: %+v", i+1, len(reply), res)
		}
		if i > 0 && !res.ConnReused {
			t.Fatalf("split after byte %d: the connection was not reused", i+1)
		}
	}
	if !*blockingReads && !pooledLoopConn(t, c) {
		t.Error("the connection is not on an event loop")
	}
}

// TestReserveLoopProcs checks that the loops get Ps of their own (GOMAXPROCS
// doubled, the loops' count kept at the original) and that the setting is
// left alone when the environment sets GOMAXPROCS or the loops run at
// another count.
func TestReserveLoopProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || n < runtime.NumCPU() {
		t.Skip("GOMAXPROCS is set or held below the CPUs here")
	}
	restore := ReserveLoopProcs()
	if got, loops := runtime.GOMAXPROCS(0), loopCount.Load(); got != 2*n || int(loops) != n {
		t.Errorf("reserved: GOMAXPROCS %d, %d loops; want %d and %d", got, loops, 2*n, n)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("restored: GOMAXPROCS %d, want %d", got, n)
	}

	runtime.GOMAXPROCS(n + 1) // the loops run at n: another count
	restore = ReserveLoopProcs()
	if got := runtime.GOMAXPROCS(0); got != n+1 {
		t.Errorf("loops at %d, GOMAXPROCS %d: reserved to %d", n, n+1, got)
	}
	restore()
	runtime.GOMAXPROCS(n)

	t.Setenv("GOMAXPROCS", strconv.Itoa(n))
	restore = ReserveLoopProcs()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Errorf("GOMAXPROCS set in the environment: changed to %d", got)
	}
	restore()
}

// TestLoopConnLines checks the layout the loops count on: a loopConn is a
// whole number of cache lines, so that the allocator starts each on a
// line, and what a token event touches (up to the exchange's first read)
// lies in its first five.
func TestLoopConnLines(t *testing.T) {
	var c loopConn
	if n := unsafe.Sizeof(c); n%64 != 0 {
		t.Errorf("loopConn is %d bytes, not a multiple of 64: adjust its padding", n)
	}
	if end := unsafe.Offsetof(c.ex) + unsafe.Offsetof(c.ex.first) + unsafe.Sizeof(c.ex.first); end > 5*64 {
		t.Errorf("the exchange's hot fields end at byte %d, past the fifth line", end)
	}
	for range 64 {
		heapConn = new(loopConn) // on the heap, as detach makes them
		if p := uintptr(unsafe.Pointer(heapConn)); p%64 != 0 {
			t.Fatalf("a loopConn at %#x: not on a cache line", p)
		}
	}
}

var heapConn *loopConn
