//go:build integration

package main

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardAgentsInChromium opens, in Debian's headless Chromium, the
// page of a `fleetbench run --agents 2` on the built-in simulator with its
// metrics scraped (--scrape sim), and checks what the agents' heartbeats
// and the server's metrics put there: each agent's row shows CPU cores
// above 0 and its streams and sessions, and the KV hit rate card shows the
// server's hit rate of the measured window so far.
func TestDashboardAgentsInChromium(t *testing.T) {
	bin := chromiumBin(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := startProc(t, ctx, "run", "", []string{tokenEnv}, nil, "--log-level", "warn", "run",
		"--agents", "2", "--concurrency", "16", "--sim-time-scale", "10", "--warmup", "1s", "--duration", "1m",
		"--max-tokens", "64", "--scrape", "sim", "--scrape-interval", "500ms", "--metrics-listen", addr, "--out", t.TempDir())
	defer func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		p.wait(t, 30*time.Second)
	}()
	base := "http://" + addr + "/ui/"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base) //nolint:noctx // a poll in a test
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard not served at %s: %v\n%s", base, err, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bctx := browser(t, ctx, bin)
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible("#chart-ttft")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}

	// The agents table's cells, by agent: agent, last report, turns/s,
	// CPU cores, streams, sessions, lag p95, lag max, coverage, state.
	rows := func() [][]string {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](
			`[...document.querySelectorAll('#agents tr[data-agent]')].map((tr) => [...tr.cells].map((c) => c.textContent))`))
		if err != nil {
			t.Fatalf("read the agents table: %v", err)
		}
		return v
	}
	healthy := func(rs [][]string) bool {
		if len(rs) != 2 {
			return false
		}
		for _, r := range rs {
			cpu, err1 := strconv.ParseFloat(r[3], 64)
			streams, err2 := strconv.Atoi(r[4])
			sessions, err3 := strconv.Atoi(r[5])
			if err1 != nil || err2 != nil || err3 != nil || cpu <= 0 || streams < 0 || sessions != 8 {
				return false
			}
		}
		return true
	}
	var rs [][]string
	end := time.Now().Add(30 * time.Second)
	for rs = rows(); !healthy(rs); rs = rows() {
		if time.Now().After(end) {
			t.Fatalf("agents table %q: want 2 agents with CPU > 0, streams and 8 sessions each\n%s", rs, p)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("agents table: %q", rs)

	kv := `[...document.querySelectorAll('#cards .card')].map((c) => c.textContent).find((s) => s.startsWith('KV hit rate')) || ''`
	var card string
	end = time.Now().Add(30 * time.Second)
	for !strings.Contains(card, "server, measured window so far") {
		if time.Now().After(end) {
			t.Fatalf("KV hit rate card %q: no server hit rate of the window so far\n%s", card, p)
		}
		time.Sleep(250 * time.Millisecond)
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](kv))
		if err != nil {
			t.Fatal(err)
		}
		card = v
	}
	t.Logf("KV hit rate card: %q", card)
}
