package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchNetHTTP is the plain path fleetbench's client must beat: one
// goroutine per session with net/http's client (a connection each, kept
// alive) sending a request as large as the workload's, reading the stream
// line by line with bufio and decoding every event with encoding/json,
// timestamping the first token. No recording beyond the floor clients'.
// Its figures, beside client=fleetbench at the same sessions, are the
// same-run A/B of the event loops and the own HTTP/1.1 path: they keep
// their place only while they save at least 10% of CPU per request or of
// added TTFT at 2,000 sessions. Run it with FLEETBENCH_BENCH_CLIENT=nethttp.
func benchNetHTTP(b *testing.B, plan benchPlan) figures {
	sessions := plan.sessions
	f := newFloorRun(b, plan)
	defer f.srv.stop()
	tr := &http.Transport{MaxIdleConnsPerHost: sessions, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := "http://" + f.addr + "/v1/chat/completions"
	body := []byte(strings.Repeat("x", 12<<10))
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
			for ctx.Err() == nil {
				start := time.Now()
				first, err := netHTTPTurn(ctx, hc, url, body)
				if err != nil {
					return
				}
				f.record(first.Sub(start))
			}
		})
	}
	time.Sleep(plan.warm)
	return f.measure(b)
}

// chatChunk is the part of a streamed chat completion event the plain
// client reads.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

// netHTTPTurn sends one request and reads its stream to the end, returning
// when its first token arrived.
func netHTTPTurn(ctx context.Context, hc *http.Client, url string, body []byte) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first time.Time
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return first, err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return first, err
		}
		if first.IsZero() && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			first = time.Now()
		}
	}
	_, err = io.Copy(io.Discard, br)
	return first, err
}
