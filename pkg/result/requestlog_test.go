package result

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
)

func TestRequestLogConcurrentRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	log := NewRequestLog(&buf, base)
	samples := craftedSamples()
	var wg sync.WaitGroup
	const workers = 8
	for g := 0; g < workers; g++ {
		wg.Go(func() {
			for i := g; i < len(samples); i += workers {
				if err := log.Write(samples[i]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := log.Write(samples[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: err = %v, want ErrClosed", err)
	}

	reqs, err := ReadRequests(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != len(samples) {
		t.Fatalf("read %d requests, want %d", len(reqs), len(samples))
	}

	// Records round-trip: find each sample's line and compare fields.
	byKey := map[[2]int]Request{}
	for _, r := range reqs {
		byKey[[2]int{r.Conversation, r.Turn}] = r
	}
	var okTTFT, savedTTFT []float64
	failed := 0
	for _, s := range samples {
		r, ok := byKey[[2]int{s.Conversation, s.Turn}]
		if !ok {
			t.Fatalf("conversation %d turn %d missing", s.Conversation, s.Turn)
		}
		res := s.Result
		if !r.ActualSend.Equal(res.Start) || r.ActualSend.Location() != time.UTC {
			t.Errorf("actual_send = %v, want %v in UTC", r.ActualSend, res.Start)
		}
		if r.ActualSendUs != res.Start.Sub(base).Microseconds() {
			t.Errorf("actual_send_us = %d", r.ActualSendUs)
		}
		if r.IntendedSendUs == nil || *r.IntendedSendUs != s.Intended.Sub(base).Microseconds() || !r.IntendedSend.Equal(s.Intended) {
			t.Errorf("intended send = %v / %v, want %v", r.IntendedSend, r.IntendedSendUs, s.Intended)
		}
		if r.TTFTMs != ms(res.TTFT) || r.E2EMs != ms(res.E2E) || r.TPOTMs != ms(res.TPOT()) || r.ITLCount != len(res.ITL) {
			t.Errorf("timings of %d/%d do not round-trip: %+v", s.Conversation, s.Turn, r)
		}
		if r.CachedTokens != res.CachedTokens || r.PromptTokens != res.PromptTokens || r.Worker != res.Worker {
			t.Errorf("tokens or worker of %d/%d do not round-trip", s.Conversation, s.Turn)
		}
		if r.OK() != res.OK() || r.ErrorClass != string(res.Class) {
			t.Errorf("status of %d/%d: ok=%v class=%q", s.Conversation, s.Turn, r.OK(), r.ErrorClass)
		}
		if res.OK() {
			okTTFT = append(okTTFT, ms(res.TTFT))
			savedTTFT = append(savedTTFT, r.TTFTMs)
		} else {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("failed = %d, want 3", failed)
	}
	for _, p := range []float64{50, 95, 99} {
		if got, want := NearestRank(savedTTFT, p), NearestRank(okTTFT, p); got != want {
			t.Errorf("p%v TTFT from saved records = %v, want %v", p, got, want)
		}
	}
}

func TestRequestLogErrorText(t *testing.T) {
	long := strings.Repeat("é", MaxErrorLen)
	tests := []struct {
		name, err   string
		want, never string
		maxLen      int
	}{
		{"plain", "http 503: upstream overloaded", "http 503: upstream overloaded", "", 0},
		{"bearer", `http 401: header "Authorization: Bearer abc.def-123" rejected`, "[REDACTED]", "abc.def-123", 0},
		{"openai key", "http 401: Incorrect API key provided: sk-proj-AbCdEf123456789", "[REDACTED]", "AbCdEf123456789", 0},
		{"long", long, "é", "", MaxErrorLen + len("…")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewRequestLog(&buf, base)
			s := &record.Sample{Conversation: 1, Turn: 1, Result: &client.Result{
				Start: base, Class: client.ClassHTTP4xx, Err: errors.New(tt.err)}}
			if err := log.Write(s); err != nil {
				t.Fatal(err)
			}
			if err := log.Flush(); err != nil {
				t.Fatal(err)
			}
			reqs, err := ReadRequests(&buf)
			if err != nil {
				t.Fatal(err)
			}
			got := reqs[0].Error
			if !strings.Contains(got, tt.want) {
				t.Errorf("error = %q, want it to contain %q", got, tt.want)
			}
			if tt.never != "" && strings.Contains(buf.String()+got, tt.never) {
				t.Errorf("saved error leaks %q: %q", tt.never, got)
			}
			if tt.maxLen > 0 && len(got) > tt.maxLen {
				t.Errorf("error is %d bytes, want at most %d", len(got), tt.maxLen)
			}
			if reqs[0].IntendedSendUs != nil || !reqs[0].IntendedSend.IsZero() {
				t.Error("unscheduled turn saved an intended send time")
			}
			if strings.Contains(buf.String(), "intended_send") {
				t.Error("unscheduled turn wrote intended_send keys")
			}
		})
	}
}

func TestCreateRequestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	log, err := CreateRequestLog(path, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range craftedSamples()[:5] {
		if err := log.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Write(&record.Sample{}); err != nil {
		t.Errorf("sample without result: %v", err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ReadRequests(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 5 {
		t.Errorf("read %d lines, want 5", len(reqs))
	}
}

func TestReadRequestsMalformed(t *testing.T) {
	in := `{"conversation":1,"turn":1}` + "\n\n" + `{"conversation":` + "\n"
	reqs, err := ReadRequests(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("err = %v, want a line 3 error", err)
	}
	if len(reqs) != 1 {
		t.Errorf("got %d requests before the bad line, want 1", len(reqs))
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestRequestLogStickyError(t *testing.T) {
	fw := &failWriter{}
	log := NewRequestLog(fw, base)
	s := craftedSamples()[0]
	if err := log.Write(s); err != nil {
		t.Fatalf("buffered write failed early: %v", err)
	}
	if err := log.Flush(); err == nil {
		t.Fatal("Flush to a failing writer succeeded")
	}
	if err := log.Write(s); err == nil {
		t.Error("Write after a failed flush succeeded")
	}
	if err := log.Close(); err == nil {
		t.Error("Close after a failed flush reported no error")
	}
	if fw.n != 1 {
		t.Errorf("underlying writer called %d times, want 1", fw.n)
	}
}

// TestRequestLogCloseSyncs checks that Close syncs a writer that can be
// synced before closing it, and reports a failed sync: lines that never
// reached the disk are lost lines.
func TestRequestLogCloseSyncs(t *testing.T) {
	w := &syncWriter{syncErr: errors.New("disk full")}
	log := NewRequestLog(w, base)
	if err := log.Write(craftedSamples()[0]); err != nil {
		t.Fatal(err)
	}
	err := log.Close()
	if !errors.Is(err, w.syncErr) {
		t.Errorf("Close = %v, want the sync error", err)
	}
	if w.calls != "write,sync,close" {
		t.Errorf("calls %q, want write,sync,close", w.calls)
	}
}

type syncWriter struct {
	calls   string
	syncErr error
}

func (w *syncWriter) add(c string) {
	if w.calls != "" {
		w.calls += ","
	}
	w.calls += c
}

func (w *syncWriter) Write(p []byte) (int, error) { w.add("write"); return len(p), nil }
func (w *syncWriter) Sync() error                 { w.add("sync"); return w.syncErr }
func (w *syncWriter) Close() error                { w.add("close"); return nil }

func BenchmarkRequestLogWrite(b *testing.B) {
	log := NewRequestLog(discard{}, base)
	s := craftedSamples()[4]
	b.ReportAllocs()
	for b.Loop() {
		if err := log.Write(s); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
