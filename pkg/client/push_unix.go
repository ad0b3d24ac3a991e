//go:build unix

package client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// pushReadsHook, when a test sets it, is given each pushed body's count of
// read(2) calls.
var pushReadsHook func(reads int)

// pushEOFCheck is the longest a pushed body waits for the poller before it
// reads again (see readPush).
const pushEOFCheck = time.Second

// readPush reads the event stream of a chunked response on a plain TCP
// connection from inside the connection's read-readiness callback
// (syscall.RawConn.Read), pushing each read's bytes through the chunked
// decoder and the SSE reader.
//
// The blocking path (read) costs two read(2) calls per token: one returns
// the token and, once it is handled, the next finds the socket empty
// (EAGAIN) before the goroutine parks on the poller. Go's poller is edge
// triggered and RawConn.Read keeps its readiness between calls of the
// callback, so here a read that returned less than the buffer had drained
// the socket, and the callback goes straight back to waiting: one read per
// wake-up, as an epoll event loop does. Closing the connection (a cancel,
// a timeout) wakes the wait with an error, as it fails a blocking read.
func (r *run) readPush(st *streamState, x *exchange) {
	pb := &st.push
	pb.reset()
	if k := x.c.br.Buffered(); k > 0 {
		// The head's read brought body bytes too; the connection's reader
		// holds at most readBufferSize, which the push buffer can take.
		b, _ := x.c.br.Peek(k)
		pb.w = copy(pb.buf, b)
		_, _ = x.c.br.Discard(pb.w)
		if st.body.first.IsZero() {
			st.body.first = time.Now()
		}
	}
	st.rd.Reset(pb)
	var (
		over  bool // the stream's end is read, or the outcome ends it
		drain *time.Timer
	)
	// events handles every event the buffered bytes hold.
	events := func(now time.Time) bool {
		for {
			ev, err := st.rd.Next()
			if errors.Is(err, sse.ErrWouldBlock) {
				return false
			}
			if r.draining {
				if err != nil {
					return true // the body's end, or the drain failed
				}
				continue
			}
			if r.step(st, ev, err, now) {
				if !r.draining {
					return true
				}
				drain = time.AfterFunc(drainTimeout, func() { r.cancel(errDrained) })
			}
		}
	}
	reads := 0
	read := func(fd uintptr) bool {
		if over = events(time.Now()); over {
			return true
		}
		for {
			space := pb.space()
			n, err := syscall.Read(int(fd), space)
			reads++
			switch err {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
			}
			now := time.Now()
			switch {
			case n > 0:
				pb.w += n
				if st.body.first.IsZero() {
					st.body.first = now
				}
			case err == nil:
				pb.rerr = io.EOF
			default:
				pb.rerr = &net.OpError{Op: "read", Net: "tcp", Source: x.c.conn.LocalAddr(),
					Addr: x.c.conn.RemoteAddr(), Err: os.NewSyscallError("read", err)}
			}
			if over = events(now); over || pb.rerr != nil {
				return true
			}
			if n < len(space) {
				return false // the socket is drained: the next bytes wake the poller
			}
		}
	}
	var err error
	for {
		// A FIN that arrives with the last bytes wakes the poller once, for
		// both, and the short read that takes the bytes leaves it behind:
		// no wake-up would come for it. So a wait lasts at most
		// pushEOFCheck; then the callback's first call reads again, which
		// finds the end or EAGAIN.
		_ = x.c.conn.SetReadDeadline(time.Now().Add(pushEOFCheck))
		err = x.c.rc.Read(read)
		if over || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
	}
	_ = x.c.conn.SetReadDeadline(time.Time{})
	if drain != nil {
		drain.Stop()
	}
	if pushReadsHook != nil {
		pushReadsHook(reads)
	}
	st.body.eof = over && pb.done && !pb.leftover()
	if err != nil && !over && !r.draining {
		// The connection was closed under the wait: a cancel or a timeout.
		r.end(st, sse.Event{}, fmt.Errorf("read event stream: %w", err), time.Now())
	} else if !over && !r.draining && pb.rerr != nil {
		r.end(st, sse.Event{}, pb.rerr, time.Now())
	}
}
