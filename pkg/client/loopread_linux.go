//go:build linux

package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
	"golang.org/x/sys/unix"
)

// ready handles an event on the connection; it runs on its loop l. It
// reports whether it woke the exchange's goroutine: the exchange ended, or
// a writer waiting for room may go on.
func (c *loopConn) ready(l *pollLoop, events uint32, buf []byte) (woke bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	x := c.x
	if x == nil {
		c.idle()
		return false
	}
	if events&unix.EPOLLOUT != 0 && x.wantOut {
		x.wantOut = false
		c.setInterest(false)
		x.signal()
		woke = true
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
		return woke
	}
	defer func() {
		// A bug here must cost one request, not the loop and every
		// stream on it.
		if p := recover(); p != nil && c.x == x {
			x.r.res.Class, x.r.res.Err = ClassProtocol, fmt.Errorf("stream request: panic: %v", p)
			x.eof = false // the goroutine closes the connection
			// Out of the loop's set, not closed: the request's goroutine may
			// still be writing to the descriptor, and closes it itself.
			_ = unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
			c.finish(x, phDone)
			woke = true
		}
	}()
	l.sink += c.warm(x) // l is c.loop, which is on a cold line of c
	c.readIn(x, buf)
	return woke || c.x != x
}

// warm loads a word from each cache line a token's handling will touch
// (fastToken's; the stream state and the chunk are for the first and last
// events), in one burst before the read: with thousands of streams each
// token finds its stream's state out of the cache, and misses issued
// together overlap (with one another and with the read system call) where
// the handling would take them one after another. It returns a sum of what
// it loaded, for the caller to keep, so that the loads are not dropped as
// dead code.
func (c *loopConn) warm(x *loopExchange) uintptr {
	if x.phase != phBody {
		return 0
	}
	t := &x.tok
	s := uintptr(c.pb.n) + uintptr(len(c.stash)) + uintptr(x.nread) + uintptr(t.chunks)
	if n := len(t.itl); n < cap(t.itl) {
		s += uintptr(t.itl[:n+1][n])
	}
	if n := len(t.text); n > 0 {
		s += uintptr(t.text[n-1])
	}
	return s
}

// idle handles an event on a connection in the pool: the server closed it
// or sent bytes no request asked for. Either way it cannot carry another
// request; it leaves the interest set (level triggered, it would fire
// again) and the pool discards it.
func (c *loopConn) idle() {
	var b [64]byte
	_, err := unix.Read(c.fd, b[:])
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return // an event for an earlier use of the descriptor
	}
	c.dead.Store(true)
	_ = unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
}

// finish ends the loop's part of x: the goroutine owns what follows.
func (c *loopConn) finish(x *loopExchange, phase loopPhase) {
	x.phase = phase
	c.x = nil
	if x.wantOut {
		// The writer wakes to this signal; a write interest left behind
		// would fire without end (level triggered).
		x.wantOut = false
		c.setInterest(false)
	}
	x.signal()
}

// readIn reads what the socket holds into buf, the loop's buffer, after
// the bytes kept from the last read, and handles it; what is left undecoded
// is kept in c.stash.
func (c *loopConn) readIn(x *loopExchange, buf []byte) {
	pb := &c.pb
	defer func() { pb.buf = nil }() // buf is the loop's
	for {
		k := copy(buf, c.stash)
		if k == len(buf) {
			if x.phase == phHead {
				c.handBack(x) // a head larger than the buffer: net/http's to judge
				return
			}
			// Undecoded body bytes fill the buffer: a framing line that
			// long is no stream.
			x.r.fail(time.Now(), errChunkLine, ClassProtocol, "read stream")
			c.finish(x, phDone)
			return
		}
		n, err := readNonblock(c.fd, buf[k:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		now := time.Now()
		pb.buf, pb.r, pb.w = buf, 0, k
		switch {
		case n > 0:
			pb.w += n
			x.nread += int64(n)
			if x.phase != phHead && x.first.IsZero() {
				x.first = now
			}
		case err == nil:
			pb.rerr = io.EOF
		default:
			pb.rerr = &net.OpError{Op: "read", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError("read", err)}
		}
		over := c.handle(x, now)
		c.stash = append(c.stash[:0], pb.buf[pb.r:pb.w]...)
		if over || pb.rerr != nil || n < len(buf)-k {
			return
		}
	}
}

// handle parses what the buffer holds at instant now; it reports whether
// the loop's part of the exchange is over.
func (c *loopConn) handle(x *loopExchange, now time.Time) bool {
	pb := &c.pb
	if x.phase == phHead {
		buf := pb.buf[pb.r:pb.w]
		if !bytes.Contains(buf, []byte("\r\n\r\n")) {
			switch {
			case notFastHead(buf):
				c.handBack(x) // net/http reads it, as on the blocking path
				return true
			case pb.rerr == nil:
				return false
			case x.nread > 0:
				c.handBack(x) // a cut head: net/http's error, as on the blocking path
				return true
			}
			x.err = pb.rerr
			c.finish(x, phDone)
			return true
		}
		if c.head == nil {
			c.head = new(respHead)
		}
		resp, n := c.head.parse(buf) //nolint:bodyclose // the loop reads the body itself (resp.Body is http.NoBody)
		if resp == nil {
			c.handBack(x)
			return true
		}
		if isJSON(resp.Header.Get("Content-Type")) {
			c.handBack(x)
			return true
		}
		pb.r += n
		pb.startBody()
		x.resp, x.headersAt, x.phase = resp, now, phBody
		if pb.r < pb.w {
			x.first = now
		}
		x.st.rd.Reset(pb)
	}
	r, st := x.r, x.st
	parsed := false // the last event came from Parse: the reader holds nothing
	for {
		// The usual event, whole in the chunk at hand, is parsed where it
		// lies; a token chunk of the stream's shape is handled from there
		// (fastToken); anything else goes through the SSE reader and the
		// run's event handling.
		var ev sse.Event
		var err error
		var n int
		d := pb.data()
		if len(d) == 0 && parsed && pb.r == pb.w && pb.more() {
			// The chunk's CRLF was the last byte read: the next event
			// needs more from the socket, and the SSE reader holds
			// nothing to tell.
			return false
		}
		switch {
		case len(d) == 0:
			parsed = false
		case x.rdIdle:
			// What the reader's Parse would do, without its lines: the
			// event (the run reads no ID) or nothing.
			var data []byte
			if data, n, parsed = sse.ParseData(d, x.rdMax); !parsed {
				break
			}
			if x.phase == phBody && x.tok.fastToken(&x.fast, data, now) {
				pb.consume(n)
				continue
			}
			ev = sse.Event{Data: data}
		default:
			ev, n, parsed = st.rd.Parse(d)
		}
		if parsed {
			pb.consume(n)
			if !x.rdIdle {
				x.rdIdle, x.rdMax = true, st.rd.Max() // Parse leaves it Idle
			}
		} else {
			x.rdIdle = false
			ev, err = st.rd.Next()
		}
		if errors.Is(err, sse.ErrWouldBlock) {
			return false
		}
		if x.phase == phDrain {
			if err != nil {
				x.eof = pb.done && !pb.leftover() && r.res.Err == nil
				c.finish(x, phDone)
				return true
			}
			continue
		}
		if r.step(st, ev, err, now) {
			if r.draining {
				x.phase = phDrain
				x.signal() // the goroutine bounds the drain
				continue
			}
			// Reused only after a success that read the body to its end,
			// as on the blocking path.
			x.eof = pb.done && !pb.leftover() && r.res.Err == nil
			c.finish(x, phDone)
			return true
		}
		x.fast.follow(&st.chunk.shape)
	}
}

// notFastHead reports bytes that cannot start a head parseHeadFast
// accepts: a status line other than "HTTP/1.1 200", or a line that ends in
// a bare LF (which net/http accepts). Such a head goes to net/http as soon
// as that is known, rather than after a "\r\n\r\n" that may never come.
func notFastHead(buf []byte) bool {
	const status = "HTTP/1.1 200"
	if n := min(len(buf), len(status)); string(buf[:n]) != status[:n] {
		return true
	}
	for i := bytes.IndexByte(buf, '\n'); i >= 0; {
		if i == 0 || buf[i-1] != '\r' {
			return true
		}
		j := bytes.IndexByte(buf[i+1:], '\n')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// handBack gives the exchange back to its goroutine with the bytes read so
// far; the connection leaves the loop.
func (c *loopConn) handBack(x *loopExchange) {
	_ = unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	c.finish(x, phHandback)
}
