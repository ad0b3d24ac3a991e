//go:build linux

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
	"golang.org/x/sys/unix"
)

// The event loops read plain-HTTP streams (h1.go) without a goroutine per
// stream waking for each token. A dialled connection leaves Go's poller:
// the client keeps a duplicate of its socket and closes Go's, and one of
// the loops (one per CPU, each waiting on its own epoll set, level
// triggered) watches it from then on. A request's goroutine arms the
// connection with its run, writes the request and sleeps until the loop
// has read the whole response: the head, then each chunk of the body,
// pushed through the chunked decoder (pushBody), the SSE reader and the
// run's event handling as the bytes arrive, stamped with the time of the
// read that brought them. A token costs one read(2) and no goroutine
// switch; the goroutine wakes once per request. A token chunk shaped as
// the stream's last one (the usual token) is handled where it lies in the
// read buffer (fastToken), touching only the connection's own lines, which
// hold the run's tokens while the loop reads.
//
// The loops handle the usual streamed reply, the one readHeadFast parses
// (200, chunked, simple headers, not JSON). Any other head is handed back:
// the socket returns to Go's poller as an ordinary connection and the
// request goes on as it would have without the loops (errors, bodies with a
// length, 1xx responses). The loops are process-wide and live as long as
// the process, as Go's poller does; a loop without connections sleeps in
// epoll_wait.

// loopPhase is where a loop exchange stands.
type loopPhase uint8

const (
	phHead     loopPhase = iota // waiting for the response head
	phBody                      // reading events
	phDrain                     // the outcome is decided ([DONE]); reading to the body's end
	phDone                      // over: the goroutine owns the run again
	phHandback                  // the head is not one the loop reads: the goroutine goes on
)

// maxLoopHead bounds the bytes a loop collects for a response head before
// it hands the connection back (net/http then applies its own limit).
const maxLoopHead = 64 << 10

// pollLoop is one event loop: an epoll set and the goroutine waiting on it.
type pollLoop struct {
	epfd int
	sink uintptr // warm's sums
}

// loopBufferSize is each loop's read buffer. Every read lands in it, so
// the bytes a token brings are in a buffer the loop touches all the time
// rather than in one of thousands of per-connection buffers; only bytes
// left undecoded at the end of a read (a partial line or head) are kept
// with their connection. It also bounds a response head the loop reads.
const loopBufferSize = maxLoopHead

// pollLoops starts the loops on first use; an error leaves the client on
// Go's poller.
var pollLoops = sync.OnceValues(func() ([]*pollLoop, error) {
	loopCount.CompareAndSwap(0, int32(max(runtime.GOMAXPROCS(0), 1)))
	loops := make([]*pollLoop, loopCount.Load())
	for i := range loops {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, l := range loops[:i] {
				_ = unix.Close(l.epfd)
			}
			return nil, os.NewSyscallError("epoll_create1", err)
		}
		loops[i] = &pollLoop{epfd: fd}
	}
	for _, l := range loops {
		go l.run()
	}
	return loops, nil
})

// loopCount is the number of event loops: the scheduler's parallelism when
// they start, or when ReserveLoopProcs fixed it before that.
var loopCount atomic.Int32

// ReserveLoopProcs gives the event loops Ps of their own: it fixes the
// number of loops at the scheduler's parallelism n and raises GOMAXPROCS
// to 2n. With n Ps shared by n loops and the requests' goroutines, a loop
// that epoll_wait woke often found its P handed to a request goroutine and
// queued for one, and the hand-offs cost CPU of their own; with 2n, a
// woken loop runs at once and the kernel shares the n CPUs among the
// threads (BenchmarkFloorRatio, docs/design.md: at 1,000 to 4,000 sessions
// fleetbench's CPU per request fell by 5 to 15%).
//
// It changes nothing when the environment sets GOMAXPROCS, when the
// runtime holds GOMAXPROCS below the CPUs the process may run on (a CPU
// limit, a cgroup quota: more runnable threads than the quota allows are
// throttled, which costs latency more than sharing Ps does), or when the
// loops already run at another count. Call it before the first request;
// the returned function sets GOMAXPROCS back (the loops keep their count).
// fleetbench's agent command, and run with a --target, call it at start.
func ReserveLoopProcs() (restore func()) {
	n := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || n < runtime.NumCPU() {
		return func() {}
	}
	if loopCount.CompareAndSwap(0, int32(n)); loopCount.Load() != int32(n) {
		return func() {}
	}
	runtime.GOMAXPROCS(2 * n)
	return func() { runtime.GOMAXPROCS(n) }
}

func (l *pollLoop) run() {
	evs := make([]unix.EpollEvent, 256)
	buf := make([]byte, loopBufferSize)
	for {
		n, err := unix.EpollWait(l.epfd, evs, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// Only a bad epoll descriptor fails here, which the client
			// never closes.
			panic(fmt.Sprintf("client: epoll_wait: %v", err))
		}
		// Each connection's first cache line (its lock, its exchange) is
		// loaded for the whole batch first, so that those misses overlap
		// rather than come one per event; fd never changes.
		for i := range evs[:n] {
			if c := loopConns.get(int(evs[i].Fd)); c != nil {
				l.sink += uintptr(c.fd)
			}
		}
		woke := false
		for i := range evs[:n] {
			if c := loopConns.get(int(evs[i].Fd)); c != nil && c.ready(l, evs[i].Events, buf) {
				woke = true
			}
		}
		if woke {
			// The requests' goroutines this batch woke are queued on this
			// loop's P: yield it to them before waiting again, so that
			// they run here, on the CPU that has just read their
			// sockets, and write their next requests while the socket
			// and the stream state are still in its cache, rather than
			// wait for another thread to be woken and steal them. At
			// 1,000 and 2,000 sessions this cut fleetbench's CPU per
			// request by 13 to 16% (BenchmarkFloorRatio, alternating
			// pairs, docs/design.md); when the cores are saturated it
			// changes nothing measurable.
			runtime.Gosched()
		}
	}
}

// loopConns finds a loop connection by its descriptor: a two-level table
// of 4,096 pages of 4,096 entries, filled as descriptors are used. An
// event for a descriptor closed and reused since epoll_wait returned
// reaches the new connection, which finds nothing to read (EAGAIN).
var loopConns connTable

const pageBits = 12

type connTable struct {
	mu    sync.Mutex // page allocation
	pages [1 << pageBits]atomic.Pointer[[1 << pageBits]atomic.Pointer[loopConn]]
}

func (t *connTable) get(fd int) *loopConn {
	if fd < 0 || fd >= 1<<(2*pageBits) {
		return nil
	}
	p := t.pages[fd>>pageBits].Load()
	if p == nil {
		return nil
	}
	return p[fd&(1<<pageBits-1)].Load()
}

func (t *connTable) set(fd int, c *loopConn) bool {
	if fd < 0 || fd >= 1<<(2*pageBits) {
		return false
	}
	p := t.pages[fd>>pageBits].Load()
	if p == nil {
		t.mu.Lock()
		if p = t.pages[fd>>pageBits].Load(); p == nil {
			p = new([1 << pageBits]atomic.Pointer[loopConn])
			t.pages[fd>>pageBits].Store(p)
		}
		t.mu.Unlock()
	}
	p[fd&(1<<pageBits-1)].Store(c)
	return true
}

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

// errAnswered stops a write the server answered before taking it all.
var errAnswered = errors.New("response before the whole request was sent")

// write writes bufs, waiting for room in the socket as needed. It returns
// errAnswered when the loop's part of the exchange ended first.
func (c *loopConn) write(ctx context.Context, x *loopExchange, bufs [][]byte) error {
	for len(bufs) > 0 {
		n, err := unix.Writev(c.fd, bufs)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			if err := c.waitWritable(ctx, x); err != nil {
				return err
			}
			continue
		case err != nil:
			return &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError("writev", err)}
		}
		for n > 0 && len(bufs) > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return nil
}

func (c *loopConn) waitWritable(ctx context.Context, x *loopExchange) error {
	c.mu.Lock()
	if c.x != x {
		c.mu.Unlock()
		return errAnswered
	}
	x.wantOut = true
	c.setInterest(true)
	c.mu.Unlock()
	select {
	case <-x.wake:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// send arms the connection with an exchange for r and st and writes bufs,
// waiting for room in the socket as needed. r's tokens move into the
// exchange until release. The exchange lives in the
// connection (its state shares the connection's cache lines) until the
// connection is pooled again. A write error closes the connection;
// errAnswered says the loop finished with the response before the request
// was all written.
func (c *loopConn) send(ctx context.Context, r *run, st *streamState, bufs [][]byte) (*loopExchange, error) {
	c.mu.Lock()
	x := &c.ex
	wake := x.wake
	if wake == nil {
		wake = make(chan struct{}, 1)
	}
	select {
	case <-wake: // a stale signal of the previous exchange
	default:
	}
	*x = loopExchange{r: r, st: st, wake: wake, tok: *r.tok}
	r.tok = &x.tok
	if c.closed || c.dead.Load() {
		// The server closed it while it was idle, after the pool handed
		// it out: as a write to it would fail (and be retried).
		c.mu.Unlock()
		c.close()
		return x, fmt.Errorf("write request: %w", io.EOF)
	}
	c.pb, c.stash = pushBody{}, c.stash[:0]
	c.setInterest(false) // an interest an earlier exchange left behind
	c.x = x
	c.mu.Unlock()
	err := c.write(ctx, x, bufs)
	if err != nil && !errors.Is(err, errAnswered) {
		c.mu.Lock()
		answered := c.x != x // the loop finished with the response first
		c.mu.Unlock()
		if answered {
			return x, errAnswered
		}
		c.abort(x)
	}
	return x, err
}

// wait waits until the loop is done with x's response or hands it back
// (phDone, phHandback), or until ctx ends or the drain after [DONE]
// outlasts drainTimeout: the connection is then closed and the phase
// reached is returned (phHead, phBody or phDrain).
func (c *loopConn) wait(ctx context.Context, x *loopExchange) loopPhase {
	var drain *time.Timer
	var drained <-chan time.Time
	defer func() {
		if drain != nil {
			drain.Stop()
		}
	}()
	for {
		c.mu.Lock()
		phase := x.phase
		c.mu.Unlock()
		switch phase {
		case phDone, phHandback:
			return phase
		case phDrain:
			if drain == nil {
				drain = time.NewTimer(drainTimeout)
				drained = drain.C
			}
		}
		select {
		case <-x.wake:
		case <-ctx.Done():
			return c.abort(x)
		case <-drained:
			return c.abort(x)
		}
	}
}

// release gives r its tokens back from x, once the loop is done with x
// (wait returned, or send failed): the connection may then carry another
// exchange.
func (x *loopExchange) release(r *run) {
	if r.tok == &x.tok {
		r.own, x.tok = x.tok, tokens{}
		r.tok = &r.own
	}
}

// abort takes the exchange back from the loop and closes the connection;
// it returns the phase the exchange had reached.
func (c *loopConn) abort(x *loopExchange) loopPhase {
	c.mu.Lock()
	defer c.mu.Unlock()
	phase := x.phase
	c.closeLocked()
	return phase
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
