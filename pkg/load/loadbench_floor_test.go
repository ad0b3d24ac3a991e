package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

// benchFloor is the least a Go client can do against the same server: one
// goroutine per session that writes a prebuilt request with a body as large
// as the workload's, reads the response with net.Conn and bufio, timestamps
// the first token's line and looks for the chunked terminator; no SSE or
// JSON parsing, no recording. Its ttft-added figures, over the same windows
// as benchClosedLoop, are what the machine itself allows: the kernel's
// loopback TCP work for both sides (a data segment and an ACK per token) and
// Go's poller and scheduler. Run it with FLEETBENCH_BENCH_CLIENT=floor.
func benchFloor(b *testing.B, plan benchPlan) figures {
	sessions := plan.sessions
	f := newFloorRun(b, plan)
	defer f.srv.stop()
	// FLEETBENCH_BENCH_FLOOR_CPUPROFILE=FILE profiles this client's window,
	// to set beside fleetbench's (FLEETBENCH_BENCH_CPUPROFILE).
	f.profile = os.Getenv("FLEETBENCH_BENCH_FLOOR_CPUPROFILE")
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range sessions {
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(i) * plan.ramp / time.Duration(sessions)):
			case <-ctx.Done():
				return
			}
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				b.Error(err)
				return
			}
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			defer stop()
			br := bufio.NewReaderSize(c, 2<<10)
			for ctx.Err() == nil {
				start := time.Now()
				if _, err := c.Write(f.req); err != nil {
					return
				}
				var first time.Time
				head := true
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					switch {
					case head:
						head = len(line) > 2
					case first.IsZero() && bytes.HasPrefix(line, []byte("data: ")):
						first = time.Now()
					}
					if string(line) == "0\r\n" {
						break
					}
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					return
				}
				f.record(first.Sub(start))
			}
		})
	}
	time.Sleep(plan.warm)
	return f.measure(b)
}

// floorRun is what the floor clients share: the scripted server, a request
// with a body as large as the workload's, and the added TTFT of the turns
// that end in the measurement window.
type floorRun struct {
	srv       *benchServer
	addr      string
	window    time.Duration
	req       []byte
	profile   string // CPU profile of the window, when set
	measuring atomic.Bool
	requests  atomic.Int64
	mu        sync.Mutex
	added     *hdr.Histogram
}

func newFloorRun(b *testing.B, plan benchPlan) *floorRun {
	TuneGC()
	srv := startServer(b, plan.env...)
	f := &floorRun{srv: srv, addr: strings.TrimPrefix(srv.raw, "http://"), window: plan.measure, added: hdr.Default.New()}
	body := strings.Repeat("x", 12<<10)
	f.req = fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", f.addr, len(body), body)
	return f
}

// record counts a turn whose first token came ttft after its send, when the
// window is open; safe for concurrent use.
func (f *floorRun) record(ttft time.Duration) {
	if !f.measuring.Load() {
		return
	}
	f.requests.Add(1)
	f.mu.Lock()
	f.added.Record(max(ttft-benchFirstToken, 0))
	f.mu.Unlock()
}

// measure opens the window for f.window, then returns the figures, named as
// benchClosedLoop names them.
func (f *floorRun) measure(b *testing.B) figures {
	stopProfile := startCPUProfile(f.profile)
	user0, sys0 := cpuTimes()
	srvCPU0, t0 := testserve.ProcCPU(f.srv.pid), time.Now()
	f.measuring.Store(true)
	time.Sleep(f.window)
	f.measuring.Store(false)
	stopProfile()
	user, sys := cpuTimes()
	user, sys = user-user0, sys-sys0
	cpu, srvCPU, elapsed := user+sys, testserve.ProcCPU(f.srv.pid)-srvCPU0, time.Since(t0)
	n := f.requests.Load()
	if n == 0 {
		b.Fatal("no request completed in the measurement window")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return figures{
		"ttft-added-p50-ms":   ms(f.added.Percentile(50)),
		"ttft-added-p99-ms":   ms(f.added.Percentile(99)),
		"ttft-added-p99.9-ms": ms(f.added.Percentile(99.9)),
		"cpu-s/1k-req":        cpu.Seconds() / float64(n) * 1000,
		"user-cpu-s/1k-req":   user.Seconds() / float64(n) * 1000,
		"server-cpu-s/1k-req": srvCPU.Seconds() / float64(n) * 1000,
		"req/s":               float64(n) / elapsed.Seconds(),
		"loadavg":             loadAverage(),
	}
}
