package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
)

// dashboardFile is the Grafana dashboard deploy/ ships.
const dashboardFile = "deploy/grafana/fleetbench-dashboard.json"

// describing is a Registerer that keeps the names of what is registered.
type describing struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

// registeredMetrics returns the names of every fleetbench metric the
// commands register: the coordinator's (with the load), an agent's and a
// sweep's.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	d := &describing{names: map[string]bool{}}
	if _, err := coordinator.New(coordinator.Config{Agents: 1, Stages: []coordinator.Stage{{Level: 1, Duration: time.Second}}},
		nil, coordinator.WithRegisterer(d)); err != nil {
		t.Fatal(err)
	}
	build := func(context.Context, agent.Spec) (agent.Target, error) { return agent.Target{}, nil }
	if _, err := agent.New(agent.Config{ID: "a", Coordinator: "c:1"}, build, nil, agent.WithRegisterer(d)); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.NewMetrics(d); err != nil {
		t.Fatal(err)
	}
	return d.names
}

// documentedMetrics returns the metrics of docs/metrics.md's table, with
// their type column.
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`fleetbench_") {
			continue
		}
		out[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	return out
}

// TestMetricsTableMatchesCode: docs/metrics.md's table lists exactly the
// fleetbench metrics the code registers, histograms named as histograms.
func TestMetricsTableMatchesCode(t *testing.T) {
	code, doc := registeredMetrics(t), documentedMetrics(t)
	if len(code) < 20 {
		t.Fatalf("only %d metrics registered: %v", len(code), code)
	}
	for name := range code {
		if _, ok := doc[name]; !ok {
			t.Errorf("%s is registered but not in docs/metrics.md's table", name)
		}
	}
	for name, typ := range doc {
		if !code[name] {
			t.Errorf("docs/metrics.md lists %s, which nothing registers", name)
		}
		if strings.HasSuffix(name, "_seconds") != (typ == "histogram") && !strings.Contains(name, "window_ttft") {
			t.Errorf("%s is documented as a %s", name, typ)
		}
	}
}

// dashboardQueries returns every panel's queries of the dashboard by
// panel title.
func dashboardQueries(t *testing.T) map[string][]dashTarget {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string      `json:"uid"`
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	if d.UID == "" {
		t.Error("the dashboard has no uid")
	}
	out := map[string][]dashTarget{}
	ids := map[int]bool{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d repeated", p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: %d queries, data source %q", p.Title, len(p.Targets), p.Datasource.UID)
			}
			out[p.Title] = append(out[p.Title], p.Targets...)
		}
	}
	walk(d.Panels)
	return out
}

type dashPanel struct {
	ID         int                  `json:"id"`
	Type       string               `json:"type"`
	Title      string               `json:"title"`
	Datasource struct{ UID string } `json:"datasource"`
	Targets    []dashTarget         `json:"targets"`
	Panels     []dashPanel          `json:"panels"`
}

type dashTarget struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

var (
	fleetbenchName = regexp.MustCompile(`\bfleetbench_[a-z0-9_]+`)
	serverName     = regexp.MustCompile(`\b(?:vllm:|sglang:|dynamo_)[a-z0-9_:]+`)
)

// baseName strips a histogram series' suffix when the bare name is known.
func baseName(name string, known func(string) bool) string {
	if known(name) {
		return name
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && known(b) {
			return b
		}
	}
	return name
}

// collectorMetrics returns the names the Go runtime's and the process's
// collectors export, which every command with --metrics-listen registers
// (newMetricsRegistry): an agent's CPU is its process_cpu_seconds_total.
func collectorMetrics() map[string]bool {
	d := &describing{names: map[string]bool{}}
	d.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return d.names
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true}
)

// promMetricNames returns the metric names a PromQL expression reads: its
// identifiers that are not functions, aggregations, keywords, label names
// or inside strings, matchers and ranges.
func promMetricNames(expr string) []string {
	e := promString.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promLabels.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " ")
		if promKeywords[id] || strings.HasPrefix(rest, "(") || (loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.')) {
			continue // a function or aggregation, a keyword, or a number's exponent
		}
		out = append(out, id)
	}
	return out
}

func TestPromMetricNames(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`histogram_quantile(0.99, sum by (instance, agent, le) (rate(fleetbench_agent_schedule_lag_seconds_bucket[$__rate_interval])))`,
			"fleetbench_agent_schedule_lag_seconds_bucket"},
		{`rate(process_cpu_seconds_total[$__rate_interval]) and on (job, instance) fleetbench_agent_connected`,
			"process_cpu_seconds_total fleetbench_agent_connected"},
		{`sum(rate(vllm:prefix_cache_hits_total{mode=~"a|b", x="y{z}"}[5m])) / sum(rate(vllm:prefix_cache_queries_total[1e3s]))`,
			"vllm:prefix_cache_hits_total vllm:prefix_cache_queries_total"},
		{`max(a) or max(b_total) unless c`, "a b_total c"},
	} {
		if got := strings.Join(promMetricNames(tc.expr), " "); got != tc.want {
			t.Errorf("promMetricNames(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestDashboardQueriesKnownMetrics: every metric name any panel of the
// dashboard reads is one fleetbench's registries export (its own, the Go
// and process collectors') or one of the serving stack's that pkg/servermetrics's
// catalogue (docs/server-metrics.md) knows, histogram series included; and
// the agents' health panels read the agents' CPU, streams and lag.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	known := registeredMetrics(t)
	for n := range collectorMetrics() {
		known[n] = true
	}
	for _, n := range servermetrics.CatalogNames() {
		known[n] = true
	}
	isKnown := func(s string) bool { return known[s] }
	reads := map[string]map[string]bool{} // panel title: metrics
	for title, targets := range dashboardQueries(t) {
		reads[title] = map[string]bool{}
		for _, q := range targets {
			for _, n := range promMetricNames(q.Expr) {
				n = baseName(n, isKnown)
				reads[title][n] = true
				if !known[n] {
					t.Errorf("panel %q (query %s) reads %s, which no fleetbench registry exports and docs/server-metrics.md does not list", title, q.RefID, n)
				}
			}
		}
	}
	for title, want := range map[string]string{
		"Agent CPU":               "process_cpu_seconds_total",
		"Agent streams in flight": "fleetbench_agent_streams_in_flight",
		"Agent schedule lag p99":  "fleetbench_agent_schedule_lag_seconds",
		"Agents connected":        "fleetbench_agent_connected",
	} {
		if !reads[title][want] {
			t.Errorf("agents' health: panel %q does not read %s (it reads %v)", title, want, reads[title])
		}
	}
}

// TestDashboardNamesDocumentedMetrics: every fleetbench metric the
// dashboard queries is in docs/metrics.md's table and registered by the
// code, every serving-stack metric is one pkg/servermetrics's catalogue
// (docs/server-metrics.md) knows, and the panels the docs promise exist.
func TestDashboardNamesDocumentedMetrics(t *testing.T) {
	code, doc := registeredMetrics(t), documentedMetrics(t)
	catalogue := servermetrics.CatalogNames()
	queries := dashboardQueries(t)
	used := map[string]bool{}
	for title, targets := range queries {
		for _, q := range targets {
			for _, n := range fleetbenchName.FindAllString(q.Expr, -1) {
				n = baseName(n, func(s string) bool { _, ok := doc[s]; return ok })
				used[n] = true
				if _, ok := doc[n]; !ok || !code[n] {
					t.Errorf("panel %q queries %s: documented %v, registered %v", title, n, ok, code[n])
				}
			}
			for _, n := range serverName.FindAllString(q.Expr, -1) {
				n = baseName(n, func(s string) bool { return slices.Contains(catalogue, s) })
				if !slices.Contains(catalogue, n) {
					t.Errorf("panel %q queries %s, which docs/server-metrics.md does not list", title, n)
				}
			}
		}
	}
	for _, title := range []string{"TTFT", "ITL", "TPOT", "E2E", "Throughput", "Errors", "Sessions in flight vs target",
		"Agents connected", "TTFT p95: client vs server", "Requests running and waiting", "Prefix-cache hit rate: client vs server"} {
		if len(queries[title]) == 0 {
			t.Errorf("the dashboard has no panel %q", title)
		}
	}
	for _, n := range []string{"fleetbench_ttft_seconds", "fleetbench_itl_seconds", "fleetbench_tpot_seconds", "fleetbench_e2e_seconds",
		"fleetbench_requests_total", "fleetbench_sessions_in_flight", "fleetbench_target_concurrency", "fleetbench_coordinator_agents_connected"} {
		if !used[n] {
			t.Errorf("no panel queries %s", n)
		}
	}
}
