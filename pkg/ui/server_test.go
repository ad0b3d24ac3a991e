package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

const goodBaseline = `{"sweep_id":"s","levels":[40,80],"modes":["kv","round_robin"],
 "by_level":{"40":{"kv":{"ttft_p50_ms":20,"ttft_p95_ms":100,"hit_rate_pct":90,"runs":1},"round_robin":{"ttft_p50_ms":30,"ttft_p95_ms":150,"hit_rate_pct":80,"runs":1}},
 "80":{"kv":{"ttft_p50_ms":25,"ttft_p95_ms":120,"hit_rate_pct":90,"runs":1}}}}`

// newTestServer returns a server whose controller records the level set.
func newTestServer(t *testing.T, token string) (*Server, *atomic.Int64) {
	t.Helper()
	var level atomic.Int64
	s, err := New(Config{Command: "run", Feed: NewFeed(), Token: token, Max: 1000,
		Control: ControllerFunc(func(_ context.Context, n int) error { level.Store(int64(n)); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &level
}

func TestConcurrencyAuthAndRange(t *testing.T) {
	const token = "s3cret-token"
	for _, tc := range []struct {
		name, remote, auth, body, ctype, origin string
		token                                   string
		want                                    int
		wantLevel                               int64
		wantErr                                 string
	}{
		{name: "loopback ok", remote: "127.0.0.1:5000", body: `{"level":80}`, want: 200, wantLevel: 80},
		{name: "ipv6 loopback ok", remote: "[::1]:5000", body: `{"level":7}`, want: 200, wantLevel: 7},
		{name: "remote without token", remote: "10.0.0.9:5000", body: `{"level":80}`, want: 401, wantErr: "fleet token"},
		{name: "remote wrong token", remote: "10.0.0.9:5000", auth: "Bearer nope", body: `{"level":80}`, want: 401, wantErr: "fleet token"},
		{name: "remote right token", remote: "10.0.0.9:5000", auth: "Bearer " + token, body: `{"level":80}`, want: 200, wantLevel: 80},
		{name: "remote, process has no token", remote: "10.0.0.9:5000", auth: "Bearer x", token: "-", body: `{"level":80}`, want: 403, wantErr: "has none"},
		{name: "zero", remote: "127.0.0.1:1", body: `{"level":0}`, want: 400, wantErr: "out of range"},
		{name: "negative", remote: "127.0.0.1:1", body: `{"level":-5}`, want: 400, wantErr: "out of range"},
		{name: "above max", remote: "127.0.0.1:1", body: `{"level":1001}`, want: 400, wantErr: "want 1 to 1000"},
		{name: "not a number", remote: "127.0.0.1:1", body: `{"level":"x"}`, want: 400, wantErr: "level"},
		{name: "no level", remote: "127.0.0.1:1", body: `{}`, want: 400, wantErr: "level"},
		{name: "form post refused", remote: "127.0.0.1:1", body: `level=5`, ctype: "application/x-www-form-urlencoded", want: 415},
		{name: "other origin refused", remote: "127.0.0.1:1", body: `{"level":5}`, origin: "http://evil.example", want: 403, wantErr: "another site"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := token
			if tc.token == "-" {
				tok = ""
			}
			s, level := newTestServer(t, tok)
			req := httptest.NewRequest(http.MethodPost, "http://example.com/ui/concurrency", strings.NewReader(tc.body))
			req.RemoteAddr = tc.remote
			ct := tc.ctype
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if got := level.Load(); got != tc.wantLevel {
				t.Errorf("level set %d, want %d (0: unchanged)", got, tc.wantLevel)
			}
			if tc.wantErr != "" && !strings.Contains(rec.Body.String(), tc.wantErr) {
				t.Errorf("body %q, want it to say %q", rec.Body, tc.wantErr)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Errorf("the answer carries the token: %q", rec.Body)
			}
		})
	}
}

func TestConcurrencyReadOnlyDuringSweep(t *testing.T) {
	s, level := newTestServer(t, "")
	s.cfg.Feed.SetSweep(func(time.Time) *Sweep { return &Sweep{Phase: "measure"} })
	req := httptest.NewRequest(http.MethodPost, "/ui/concurrency", strings.NewReader(`{"level":5}`))
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusConflict || level.Load() != 0 {
		t.Fatalf("status %d, level %d: want 409 and no change", rec.Code, level.Load())
	}
}

func TestBaselineUpload(t *testing.T) {
	s, _ := newTestServer(t, "tok")
	post := func(body, remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/ui/baseline?name=b.json", strings.NewReader(body))
		req.RemoteAddr = remote
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	if rec := post(goodBaseline, "127.0.0.1:1"); rec.Code != 200 {
		t.Fatalf("good baseline: %d %s", rec.Code, rec.Body)
	}
	for name, body := range map[string]string{
		"not json":      `{"by_level":`,
		"empty":         `{}`,
		"bad level":     `{"by_level":{"abc":{"kv":{"ttft_p95_ms":1}}}}`,
		"negative":      `{"by_level":{"4":{"kv":{"ttft_p95_ms":-1}}}}`,
		"no mode":       `{"by_level":{"4":{}}}`,
		"wrong type":    `{"by_level":{"4":{"kv":{"ttft_p95_ms":"fast"}}}}`,
		"two documents": goodBaseline + goodBaseline,
	} {
		rec := post(body, "127.0.0.1:1")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "baseline.json") {
			t.Errorf("%s: %d %s, want 400 naming baseline.json", name, rec.Code, rec.Body)
		}
	}
	if rec := post(goodBaseline, "10.1.1.1:1"); rec.Code != http.StatusUnauthorized {
		t.Errorf("remote upload without the token: %d", rec.Code)
	}
	// Nothing changed: the first baseline is still there.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/baseline", nil))
	var got struct {
		Name     string
		Version  int
		Baseline map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "b.json" || got.Version != 1 || got.Baseline["sweep_id"] != "s" {
		t.Errorf("baseline after refused uploads: %+v", got)
	}
}

// TestEventsStopOnCloseAndClientGone checks the feed's stream sends
// snapshots and ends when the client goes and when the server closes.
func TestEventsStopOnCloseAndClientGone(t *testing.T) {
	s, _ := newTestServer(t, "")
	s.cfg.Interval = 20 * time.Millisecond
	ts := httptest.NewServer(s)
	defer ts.Close()

	read := func(ctx context.Context) (*bufio.Reader, *http.Response) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/ui/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return bufio.NewReader(resp.Body), resp
	}
	ctx, cancel := context.WithCancel(t.Context())
	br, resp := read(ctx)
	for range 2 {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: {") {
			t.Fatalf("event %q, %v", line, err)
		}
		_, _ = br.ReadString('\n')
	}
	cancel() // the client goes
	resp.Body.Close()

	br, resp = read(t.Context())
	defer resp.Body.Close()
	_, _ = br.ReadString('\n')
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	s.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after Close")
	}
	// Closing the test server waits for every handler: it would hang if
	// one were still streaming.
}

// TestFeedMergesNotAverages checks the rolling figures are the quantiles
// of the merged histograms of two reports, not the mean of theirs.
func TestFeedMergesNotAverages(t *testing.T) {
	f := NewFeed()
	now := time.Unix(1_700_000_000, 0)
	f.now = func() time.Time { return now }
	lb := loadmetrics.Labels{Mode: "kv", Level: 10, Phase: loadmetrics.PhaseMeasure}
	f.SetStage(lb, 10)
	mk := func(ms ...int) *record.Window {
		w := record.NewWindow(1, hdr.Default)
		for _, v := range ms {
			w.Hist[record.TTFT].Record(time.Duration(v) * time.Millisecond)
		}
		w.Counters.Requests = int64(len(ms))
		return w
	}
	// Agent a: 9 fast turns; agent b: 1 slow one. The merged p50 is fast;
	// averaging the two agents' p50 would give about 505 ms.
	f.Add(mk(10, 10, 10, 10, 10, 10, 10, 10, 10), lb)
	f.Add(mk(1000), lb)
	now = now.Add(2 * time.Second)
	s := f.Snapshot(now)
	if p50 := s.Rolling.TTFT.P50; p50 < 9 || p50 > 11 {
		t.Errorf("rolling TTFT p50 %v ms, want about 10 (merged)", p50)
	}
	if p99 := s.Rolling.TTFT.P99; p99 < 990 || p99 > 1010 {
		t.Errorf("rolling TTFT p99 %v ms, want about 1000", p99)
	}
	if s.Rolling.Requests != 10 || len(s.Windows) != 1 || s.Windows[0].Requests != 10 || s.Windows[0].Closed {
		t.Errorf("rolling %d requests, windows %+v", s.Rolling.Requests, s.Windows)
	}
	f.ClearStage()
	if s := f.Snapshot(now); !s.Windows[0].Closed || s.Stage.Running {
		t.Errorf("after ClearStage: %+v %+v", s.Stage, s.Windows)
	}
}
