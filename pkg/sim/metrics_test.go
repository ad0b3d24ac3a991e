package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

func TestMetricsNamesAndTypes(t *testing.T) {
	s := startSim(t, func(c *Config) { c.Replicas = 2 })
	c := testClient()
	for range 3 {
		r, err := post(context.Background(), c, s.URL(), "/v1/chat/completions",
			chatBody([]openai.Message{{Role: "user", Content: words(2, 300)}}, 10))
		if err != nil || r.status != 200 {
			t.Fatalf("%v %+v", err, r)
		}
	}
	text, err := scrape(s)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{
		"vllm:prefix_cache_hits_total":                         "counter",
		"vllm:prefix_cache_queries_total":                      "counter",
		"vllm:kv_cache_usage_perc":                             "gauge",
		"vllm:num_requests_running":                            "gauge",
		"vllm:num_requests_waiting":                            "gauge",
		"vllm:request_success_total":                           "counter",
		"vllm:prompt_tokens_total":                             "counter",
		"vllm:generation_tokens_total":                         "counter",
		"vllm:time_to_first_token_seconds":                     "histogram",
		"vllm:num_preemptions_total":                           "counter",
		"fleetbench_sim_time_to_first_token_simulated_seconds": "histogram",
		"fleetbench_sim_kv_cache_evicted_blocks_total":         "counter",
		"dynamo_frontend_cached_tokens":                        "histogram",
		"dynamo_frontend_input_sequence_tokens":                "histogram",
		"dynamo_frontend_output_tokens_total":                  "counter",
		"dynamo_frontend_requests_total":                       "counter",
		"dynamo_frontend_time_to_first_token_seconds":          "histogram",
		"vllm:request_queue_time_seconds":                      "histogram",
		"dynamo_component_inflight_requests":                   "gauge",
	}
	for name, typ := range types {
		if !strings.Contains(text, "# TYPE "+name+" "+typ+"\n") {
			t.Errorf("/metrics lacks %s of type %s", name, typ)
		}
	}
	if n, err := testutil.GatherAndCount(s.Gatherer(), "vllm:prefix_cache_hits_total"); err != nil || n != 2 {
		t.Errorf("per-worker series of prefix_cache_hits: %d %v", n, err)
	}
	// Same prompt three times: the 2nd and 3rd hit the full blocks.
	hits := testutil.ToFloat64(s.workers[0].m.prefixHits) + testutil.ToFloat64(s.workers[1].m.prefixHits)
	if hits < 2*288 {
		t.Errorf("prefix cache hits %v", hits)
	}
	want := `
# HELP dynamo_frontend_requests_total Total number of LLM requests processed.
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{endpoint="chat_completions",model="` + s.cfg.Model + `",request_type="stream",status="success"} 3
`
	if err := testutil.CollectAndCompare(s.m.feRequests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Dynamo's own query for the requests its backend workers hold.
	if !strings.Contains(text, `dynamo_component_inflight_requests{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="fleetbench-sim",engine="0"`) {
		t.Errorf("/metrics lacks dynamo_component_inflight_requests with Dynamo's component labels")
	}
	if got := testutil.ToFloat64(s.m.feOutput); got != 30 {
		t.Errorf("dynamo_frontend_output_tokens_total = %v, want 30", got)
	}
}
