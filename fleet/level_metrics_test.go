package fleet

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRunMetrics: a run with a registry, on one engine and on three
// agents, exports the load as it goes; once it is over the measured
// phase's requests equal result.json's and its TTFT histogram counts every
// completed request, the stage info is gone, and with agents each agent's
// health is there under its id.
func TestRunMetrics(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	var requests atomic.Int64
	srv := sseServer(t, &requests)
	defer srv.Close()
	for _, agents := range []int{0, 3} {
		t.Run(fmt.Sprintf("%d agents", agents), func(t *testing.T) {
			dir := t.TempDir()
			rc := agentsLevel(srv.URL, dir)
			rc.Agents, rc.Label = agents, "kv"
			reg := prometheus.NewPedanticRegistry()
			rc.Registerer = reg
			var out, errb bytes.Buffer
			if _, err := rc.Run(t.Context(), hclog.New(&hclog.LoggerOptions{Output: &errb}), &out, &errb); err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			res := readResult(t, dir)
			completed, failed := res["completed"].(float64), res["failed"].(float64)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var measured, ttft float64
			series := map[string]int{}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					series[mf.GetName()]++
					l := map[string]string{}
					for _, lp := range m.GetLabel() {
						l[lp.GetName()] = lp.GetValue()
					}
					if l["phase"] != "measure" {
						continue
					}
					if l["mode"] != "kv" || l["level"] != "6" {
						t.Errorf("%s labels %v, want mode kv, level 6", mf.GetName(), l)
					}
					switch mf.GetName() {
					case "fleetbench_requests_total":
						measured += m.GetCounter().GetValue()
					case "fleetbench_ttft_seconds":
						ttft += float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
			if measured != completed+failed || completed == 0 {
				t.Errorf("requests of the measured phase %v, result.json %v completed + %v failed", measured, completed, failed)
			}
			if ttft != completed {
				t.Errorf("TTFT histogram counts %v, result.json %v completed", ttft, completed)
			}
			if series["fleetbench_stage_info"] != 0 {
				t.Error("the stage info outlived the run")
			}
			if agents > 0 && series["fleetbench_agent_reports_sent_total"] != agents {
				t.Errorf("%d agents' reports series, want %d", series["fleetbench_agent_reports_sent_total"], agents)
			}
		})
	}
}
