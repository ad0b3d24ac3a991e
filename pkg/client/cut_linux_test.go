package client

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCutWithLastData: a server that dies mid-stream may send its last
// bytes and its FIN in one segment. Edge-triggered polling wakes the reader
// once for both; the read that takes the bytes is short and the FIN waits
// behind it, so a reader that skipped the read after a short one (it finds
// EAGAIN when nothing else came) would wait for ever. The stream must end
// as cut, at once, with no timeout configured.
func TestCutWithLastData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go finWithLastData(conn)
		}
	}()
	c := mustNew(t, newConfig("http://"+ln.Addr().String()))
	for i := range 3 {
		start := time.Now()
		res := c.Stream(t.Context(), userRequest("hi"))
		took := time.Since(start)
		if res.Class != ClassStreamCut || res.Text != "ab" {
			t.Fatalf("request %d: class %q err %v text %q; want stream_cut after \"ab\"", i, res.Class, res.Err, res.Text)
		}
		// The second chunk comes 50 ms after the first.
		if took > 500*time.Millisecond {
			t.Errorf("request %d: the cut was seen after %v; want it when the FIN came, ~50 ms", i, took)
		}
	}
}

// finWithLastData answers one request: a chunk, then 50 ms later a second
// chunk and the FIN in one segment (TCP_CORK holds the bytes until close).
func finWithLastData(conn net.Conn) {
	defer conn.Close()
	if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
		return
	}
	frame := func(ev string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev) }
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	if _, err := conn.Write([]byte(head + frame(chunk("a", "")))); err != nil {
		return
	}
	time.Sleep(50 * time.Millisecond)
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1) })
	_, _ = conn.Write([]byte(frame(strings.TrimSpace(chunk("b", "")) + "\n\n")))
}
