//go:build linux

package client

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// loopConn is a connection the loops read. What a token event touches
// comes first, in the first five of its seven cache lines (the size is a
// multiple of 64 bytes, so every loopConn starts on a line): the lock, the
// chunked decoder's state and the exchange's, the run's tokens included.
type loopConn struct {
	mu     sync.Mutex
	closed bool
	out    bool          // EPOLLOUT is in the interest set
	x      *loopExchange // the exchange being read (&ex); nil when idle
	fd     int
	stash  []byte       // bytes read and not yet decoded, kept between reads
	pb     pushBody     // the head, then the chunked body's decoder; its buffer is the loop's during a read
	ex     loopExchange // the connection's current exchange

	dead          atomic.Bool
	loop          *pollLoop
	head          *respHead // each reply's head, parsed into the same storage
	local, remote net.Addr  // for errors
	_             [16]byte  // to 448 bytes (TestLoopConnLines)
}

// loopExchange is one request's use of a loop connection. The fields
// after wake belong to whoever holds the connection's lock; the run and
// stream state belong to the loop from arm until the phase is phDone or
// phHandback (or the goroutine aborted).
type loopExchange struct {
	// What every read touches first.
	r       *run
	st      *streamState
	phase   loopPhase
	wantOut bool      // the writer waits for room in the socket
	eof     bool      // the body was read to its end and nothing followed
	rdIdle  bool      // st.rd is Idle: its Parse has taken the last event
	rdMax   int       // st.rd.Max()
	fast    fastShape // the token chunks' shape, for fastToken
	tok     tokens    // the run's, while the loop reads (run.tok is &tok)
	nread   int64     // response bytes read
	first   time.Time // the first body byte's read

	wake      chan struct{} // capacity 1: something changed
	err       error         // the head phase's failure
	resp      *http.Response
	headersAt time.Time
}

// useLoops reports whether plain-HTTP connections go to the loops.
func useLoops() bool {
	loops, err := pollLoops()
	return err == nil && len(loops) > 0
}

// detach moves a dialled TCP connection from Go's poller to a loop. On
// failure conn is left as it was and nil is returned.
func detach(conn net.Conn) *loopConn {
	loops, err := pollLoops()
	tc, ok := conn.(*net.TCPConn)
	if err != nil || !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	if cerr := rc.Control(func(s uintptr) {
		fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil || err != nil {
		return nil
	}
	c := &loopConn{fd: fd, loop: loops[fd%len(loops)], local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	if !loopConns.set(fd, c) {
		_ = unix.Close(fd)
		return nil
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		loopConns.set(fd, nil)
		_ = unix.Close(fd)
		return nil
	}
	// Go's descriptor goes; the socket stays open through the duplicate
	// (close(2) on one descriptor of two does not shut the socket down).
	_ = conn.Close()
	return c
}

// close closes the connection; safe to call more than once and from any
// goroutine.
func (c *loopConn) close() {
	c.mu.Lock()
	c.closeLocked()
	c.mu.Unlock()
}

func (c *loopConn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	c.x = nil
	loopConns.set(c.fd, nil)
	_ = unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	_ = unix.Close(c.fd)
}

// signal wakes the exchange's goroutine.
func (x *loopExchange) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// setInterest sets the epoll interest: read, and write when out is set.
func (c *loopConn) setInterest(out bool) {
	if c.out == out || c.closed {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}
	if out {
		ev.Events |= unix.EPOLLOUT
	}
	if unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev) == nil {
		c.out = out
	}
}

// handOver returns the connection to Go's poller as a net.Conn, with the
// bytes the loop read and did not use; the loop connection is closed.
func (c *loopConn) handOver() (net.Conn, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, net.ErrClosed
	}
	left := bytes.Clone(c.stash)
	c.closed = true
	loopConns.set(c.fd, nil)
	f := os.NewFile(uintptr(c.fd), "tcp")
	conn, err := net.FileConn(f) // a duplicate, on Go's poller
	_ = f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("hand connection back: %w", err)
	}
	return conn, left, nil
}

// reusable reports whether the connection may carry another request.
func (c *loopConn) reusable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && !c.dead.Load() && len(c.stash) == 0
}
