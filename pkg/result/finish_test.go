package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
)

func TestEarlyStopWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		finish map[string]int64
		want   string // "" for no warning
	}{
		{"most stop", map[string]int64{"stop": 85, "length": 15}, `85% of answers (85 of 100) ended with finish_reason "stop"`},
		{"half stop", map[string]int64{"stop": 50, "length": 50}, ""},
		{"all length", map[string]int64{"length": 100}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EarlyStopWarning(tc.finish)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want one containing %q", got, tc.want)
			}
			if got != "" && !strings.Contains(got, `--extra-body '{"ignore_eos": true}'`) {
				t.Errorf("warning %q does not say how to get the intended lengths", got)
			}
		})
	}
}

func TestWorkerHeaderNote(t *testing.T) {
	for _, tc := range []struct {
		name      string
		asked     string
		seen      map[string]int64
		completed int64
		want      string // "" for no note
	}{
		{"not asked", "", map[string]int64{"X-Fleetbench-Worker": 10}, 10, ""},
		{"seen", "X-Served-By", map[string]int64{"X-Served-By": 10}, 10, ""},
		{"seen in another case", "x-served-by", map[string]int64{"X-Served-By": 10}, 10, ""},
		{"default used", "X-Servd-By", map[string]int64{"X-Fleetbench-Worker": 10}, 10,
			"--worker-header X-Servd-By was never seen in 10 successful responses; workers were named by X-Fleetbench-Worker (10 responses)"},
		{"none named", "X-Servd-By", nil, 10, "no default header named a worker"},
		{"no request succeeded", "X-Servd-By", nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WorkerHeaderNote(tc.asked, tc.seen, tc.completed)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// earlyStopServer streams two tokens of each answer, whatever max_tokens
// asked for, and ends with finish_reason "stop", naming its worker in
// X-Fleetbench-Worker.
func earlyStopServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(client.DefaultWorkerHeader, "worker-0")
		for i, finish := range []string{"null", `"stop"`} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" t%d\"},\"finish_reason\":%s}]}\n\n", i, finish)
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

// TestEarlyStopLoopback sends turns of 64 tokens to a loopback server that
// stops each after two with finish_reason "stop", asking for a worker
// header it never sends: the block and result.json count the finish
// reasons, warn that answers stopped early, and say the asked header was
// never seen and which one named the workers.
func TestEarlyStopLoopback(t *testing.T) {
	srv := earlyStopServer()
	defer srv.Close()
	cl, err := client.New(client.Config{BaseURL: srv.URL + "/v1", Model: "m", MaxTokens: 64, WorkerHeader: "X-Served-By"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := record.NewWindow(1, hdr.Default)
	const n = 20
	for i := range n {
		res := cl.Stream(t.Context(), &client.Request{Messages: []openai.Message{{Role: "user", Content: "q"}}, MaxTokens: 64})
		if !res.OK() {
			t.Fatalf("request %d: %v", i, res.Err)
		}
		w.Add(&record.Sample{Window: 1, Conversation: i, Turn: 1, Intended: res.Start, Result: res})
	}
	s, err := New(w, Load{Model: "m", Workload: "docchat", WorkerHeader: "X-Served-By"}.Facts(time.Unix(0, 0), time.Unix(10, 0), 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteBlock(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Finish reasons:                          stop 20",
		`Answers stopped early:                   100% of answers (20 of 20) ended with finish_reason "stop"`,
		"Worker header warning:                   --worker-header X-Served-By was never seen in 20 successful responses; workers were named by X-Fleetbench-Worker (20 responses)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("block lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if fr, _ := m["finish_reasons"].(map[string]any); fr["stop"] != float64(n) || len(fr) != 1 {
		t.Errorf("finish_reasons = %v, want stop %d", m["finish_reasons"], n)
	}
	if !strings.Contains(fmt.Sprint(m["finish_warning"]), "ignore_eos") || !strings.Contains(fmt.Sprint(m["worker_header_warning"]), "X-Served-By") {
		t.Errorf("finish_warning %q, worker_header_warning %q", m["finish_warning"], m["worker_header_warning"])
	}
}
