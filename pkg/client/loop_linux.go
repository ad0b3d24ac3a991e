//go:build linux

package client

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

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
