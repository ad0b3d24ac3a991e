package load

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// epollConn is one session of benchEpoll.
type epollConn struct {
	fd           int
	start, first time.Time
	head         bool   // still in the response head
	tail         []byte // the last bytes read, to find the terminator across reads
}

// benchEpoll is a lower floor than benchFloor: no goroutine per session but
// one event loop per CPU, each waiting on its own epoll set with raw system
// calls, as a C load generator would (wrk). It reads each socket until
// EAGAIN, timestamps the first token's line and sends the next request when
// it sees the chunked terminator; nothing is parsed or recorded beyond that.
// What it measures is the machine: kernel loopback TCP for both sides and the
// scripted server. Run it with FLEETBENCH_BENCH_CLIENT=epoll.
func benchEpoll(b *testing.B, plan benchPlan) figures {
	sessions := plan.sessions
	f := newFloorRun(b, plan)
	defer f.srv.stop()
	f.profile = os.Getenv("FLEETBENCH_BENCH_EPOLL_CPUPROFILE")
	ap, err := netip.ParseAddrPort(f.addr)
	if err != nil {
		b.Fatal(err)
	}
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	req := f.req

	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	loops := max(runtime.GOMAXPROCS(0), 1)
	eps := make([]int, loops)
	// The sessions by file descriptor, which the kernel allocates lowest
	// first: the loops read them while sessions are still being added.
	conns := make([]atomic.Pointer[epollConn], sessions+1<<14)
	for i := range eps {
		if eps[i], err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
			b.Fatal(err)
		}
	}
	send := func(c *epollConn) bool {
		c.start, c.first, c.head, c.tail = time.Now(), time.Time{}, true, c.tail[:0]
		for off := 0; off < len(req); {
			n, err := syscall.Write(c.fd, req[off:])
			switch {
			case err == syscall.EAGAIN:
				runtime.Gosched()
			case err != nil:
				return false
			default:
				off += n
			}
		}
		return true
	}
	loop := func(i int) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		evs := make([]syscall.EpollEvent, 256)
		buf := make([]byte, 16<<10)
		for ctx.Err() == nil {
			n, err := syscall.EpollWait(eps[i], evs, 100)
			if err != nil {
				continue // EINTR
			}
			for _, ev := range evs[:n] {
				c := conns[ev.Fd].Load()
				if c == nil {
					continue
				}
				for {
					k, err := syscall.Read(c.fd, buf)
					if k <= 0 || err != nil {
						break
					}
					data := buf[:k]
					if c.head {
						if j := bytes.Index(data, []byte("\r\n\r\n")); j >= 0 {
							c.head, data = false, data[j+4:]
						}
					}
					// The first token counts when its bytes are read, as
					// fleetbench's client stamps it after its read (not
					// when epoll_wait returned: the rest of the batch's
					// reads would not count).
					if !c.head && c.first.IsZero() && bytes.Contains(data, []byte("data: ")) {
						c.first = time.Now()
					}
					c.tail = append(c.tail, data...)
					if len(c.tail) > 64 {
						c.tail = append(c.tail[:0], c.tail[len(c.tail)-8:]...)
					}
					if k < len(buf) {
						break
					}
				}
				if !c.head && bytes.HasSuffix(c.tail, []byte("\r\n0\r\n\r\n")) {
					f.record(c.first.Sub(c.start))
					if plan.burn > 0 {
						for t := time.Now(); time.Since(t) < plan.burn; {
						}
					}
					send(c)
				}
			}
		}
	}
	for i := range loops {
		wg.Go(func() { loop(i) })
	}
	defer func() {
		cancel()
		wg.Wait()
		for i := range conns {
			if c := conns[i].Load(); c != nil {
				_ = syscall.Close(c.fd)
			}
		}
		for _, ep := range eps {
			_ = syscall.Close(ep)
		}
	}()
	start := time.Now()
	for i := range sessions {
		time.Sleep(time.Until(start.Add(time.Duration(i) * plan.ramp / time.Duration(sessions))))
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			err = syscall.Connect(fd, sa)
		}
		if err == nil {
			err = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		}
		if err == nil {
			err = syscall.SetNonblock(fd, true)
		}
		if err != nil {
			b.Fatal(&net.OpError{Op: "dial", Net: "tcp", Err: err})
		}
		if fd >= len(conns) {
			_ = syscall.Close(fd)
			b.Fatalf("file descriptor %d past the %d slots", fd, len(conns))
		}
		c := &epollConn{fd: fd}
		l := i % loops
		conns[fd].Store(c)
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | -syscall.EPOLLET, Fd: int32(fd)}
		if err := syscall.EpollCtl(eps[l], syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			b.Fatal(err)
		}
		send(c)
	}
	time.Sleep(time.Until(start.Add(plan.warm)))
	return f.measure(b)
}
