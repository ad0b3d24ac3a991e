//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// chromiumEnv names the Chromium binary (scripts/chromium.sh reads it too);
// chromiumRequire makes a missing one a failure, as `make test` sets.
const (
	chromiumEnv     = "FLEETBENCH_CHROMIUM"
	chromiumRequire = "FLEETBENCH_REQUIRE_CHROMIUM"
)

// chromiumBin returns Debian's chromium, or skips the test (fails it with
// FLEETBENCH_REQUIRE_CHROMIUM=1) when it is not installed.
func chromiumBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(chromiumEnv)
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no Chromium at %s (scripts/chromium.sh install): %v", bin, err)
		if os.Getenv(chromiumRequire) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// browser starts a headless Chromium of its own (fresh profile, nothing
// beyond loopback) for the test and returns its context; it ends with
// the test.
func browser(t *testing.T, ctx context.Context, bin string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1800),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	return bctx
}

// simInFlight is the requests the simulator is serving, over its workers.
func simInFlight(ctx context.Context, s *sim.Sim) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/admin/state", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st sim.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	n := 0
	for _, v := range st.InFlight {
		n += v
	}
	return n, nil
}

// TestDashboardInChromium opens the live dashboard of a running
// `fleetbench run` against the simulator in a real headless Chromium: the
// charts update, the slider moves the level from 40 to 80 and the
// simulator's in-flight count follows, a baseline's reference lines are
// drawn (and a malformed one is refused with a message, nothing changed),
// and a screenshot is saved.
func TestDashboardInChromium(t *testing.T) {
	bin := chromiumBin(t)
	s := startSim(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	p := startProc(t, ctx, "run", "", []string{tokenEnv}, nil, "--log-level", "warn", "run",
		"--target", s.URL(), "--model", "sim-model", "--concurrency", "40", "--warmup", "2s", "--duration", "2m",
		"--max-tokens", "64", "--metrics-listen", addr, "--out", t.TempDir())
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

	evalInt := func(expr string) int {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		end := time.Now().Add(timeout)
		for !ok() {
			if time.Now().After(end) {
				t.Fatalf("%s: not within %v\n%s", what, timeout, p)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible("#chart-ttft")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	updates := `Number(document.body.dataset.updates || 0)`
	points := `Number((document.querySelector('#chart-ttft path.series') || {getAttribute: () => 0}).getAttribute('data-points') || 0)`
	waitFor("the charts draw points", 30*time.Second, func() bool { return evalInt(points) >= 2 })
	u0, n0 := evalInt(updates), evalInt(points)
	waitFor("the charts update", 15*time.Second, func() bool { return evalInt(updates) >= u0+2 && evalInt(points) > n0 })
	if got := evalInt(`Number(document.getElementById('slider').value)`); got != 40 {
		t.Errorf("slider at %d, want the run's 40", got)
	}

	before, err := simInFlight(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if before > 45 {
		t.Errorf("simulator in flight %d before the change, want about 40", before)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		const s = document.getElementById('slider');
		s.value = 80;
		s.dispatchEvent(new Event('input'));
		s.dispatchEvent(new Event('change'));
		return true; })()`)); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	waitFor("the simulator's in-flight count follows the slider to 80", 20*time.Second, func() bool {
		n, err := simInFlight(ctx, s)
		return err == nil && n >= 72
	})
	t.Logf("simulator in flight %d before; at least 72 of 80 after %v", before, time.Since(changed).Round(10*time.Millisecond))
	if msg, err := chromedp.Run(bctx, chromedp.Text("#control-msg")); err != nil || msg != "Concurrency set to 80." {
		t.Errorf("control message %q (%v)", msg, err)
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "baseline.json")
	bad := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(good, []byte(`{"sweep_id":"t","levels":[40,80],"modes":["kv","round_robin"],"by_level":{
		"80":{"kv":{"ttft_p50_ms":20,"ttft_p95_ms":60,"hit_rate_pct":94,"runs":1},"round_robin":{"ttft_p50_ms":30,"ttft_p95_ms":90,"hit_rate_pct":80,"runs":1}},
		"40":{"kv":{"ttft_p50_ms":15,"ttft_p95_ms":40,"hit_rate_pct":94,"runs":1},"round_robin":{"ttft_p50_ms":20,"ttft_p95_ms":50,"hit_rate_pct":80,"runs":1}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"by_level": {"eighty": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.SetUploadFiles("#baseline-file", []string{good})); err != nil {
		t.Fatal(err)
	}
	refs := `document.querySelectorAll('#chart-ttft line.baseline').length`
	waitFor("the baseline's reference lines", 10*time.Second, func() bool { return evalInt(refs) == 2 })
	// The reference lines are each mode's TTFT p95 at the current level,
	// 80, once the page has had the feed's event with the new target (one
	// a second: the upload may come first and be drawn at level 40).
	rr := `Number(document.querySelector('#chart-ttft line.baseline[data-mode="round_robin"]').getAttribute('data-value'))`
	end := time.Now().Add(5 * time.Second)
	for evalInt(rr) != 90 && time.Now().Before(end) {
		time.Sleep(250 * time.Millisecond)
	}
	if v := evalInt(rr); v != 90 {
		t.Errorf("round_robin reference at %d ms, want 90 (its p95 at level 80)", v)
	}
	if err := chromedp.Do(bctx, chromedp.SetUploadFiles("#baseline-file", []string{bad})); err != nil {
		t.Fatal(err)
	}
	waitFor("a message for the malformed baseline", 10*time.Second, func() bool {
		m, _ := chromedp.Run(bctx, chromedp.Text("#baseline-msg"))
		return len(m) > 0 && m[:min(len(m), 19)] == "Baseline not loaded"
	})
	time.Sleep(1500 * time.Millisecond) // a feed event or two later, still the first baseline
	if n := evalInt(refs); n != 2 {
		t.Errorf("%d reference lines after the malformed baseline, want the first baseline's 2", n)
	}

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("out", "test-artifacts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(out, "dashboard-"+strconv.FormatInt(time.Now().Unix(), 10)+".png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(shot)
	t.Logf("screenshot: %s (%d bytes)", abs, len(png))
}
