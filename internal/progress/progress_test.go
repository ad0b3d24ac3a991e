package progress

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func countLine(n int, _ time.Time) (string, bool) { return fmt.Sprintf("status %d", n), n >= 0 }

// run starts d and returns a function that stops it and waits.
func run[S any](t *testing.T, d *Display[S]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// TestTerminalLogLinesGoAbove: on a terminal, a log line written while a
// status is shown is printed above it and the status drawn again, so the
// two are never glued together; the status is cleared at the end.
func TestTerminalLogLinesGoAbove(t *testing.T) {
	var out syncBuffer
	d := New(&out, true, nil, "progress", countLine)
	stop := run(t, d)
	d.Update(1)
	for !strings.Contains(out.String(), "status 1") {
		time.Sleep(5 * time.Millisecond)
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: d.LogOutput(), DisableTime: true})
	logger.Info("a log line")
	stop()
	want := "\r\x1b[Kstatus 1\r\x1b[K[INFO]  a log line\nstatus 1\r\x1b[K"
	if s := out.String(); s != want {
		t.Errorf("terminal output\n %q\nwant\n %q", s, want)
	}
}

// TestNotTerminalLogs: off a terminal nothing is drawn; the status is
// logged on the ticks, not on Update, and a finished status (ok false) is
// not logged.
func TestNotTerminalLogs(t *testing.T) {
	var out, logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, DisableTime: true})
	d := New(&out, false, logger, "progress", countLine)
	if d.LogOutput() != &out {
		t.Error("LogOutput off a terminal is not out itself")
	}
	d.Update(-1)
	stop := run(t, d)
	time.Sleep(50 * time.Millisecond)
	stop()
	if out.String() != "" || logs.String() != "" {
		t.Errorf("output %q, logs %q: want nothing", out.String(), logs.String())
	}
}
