package servermetrics

import (
	"strings"
)

// absentNote ends every Absent entry: both spellings of a counter are read.
const absentNote = " (counters with or without _total)"

// absent names the metrics of each figure that no endpoint read at both
// edges exported, by the figure's key in Figures.Sources; nil when no
// endpoint was read (then every figure is missing for that reason) or
// every figure had a source.
func absent(calcs []endpointCalc, st *[numGaugeFigures]stat) map[string]string {
	read := false
	for _, c := range calcs {
		read = read || c.ok
	}
	if !read {
		return nil
	}
	found := func(has func(endpointCalc) bool) bool {
		for _, c := range calcs {
			if c.ok && has(c) {
				return true
			}
		}
		return false
	}
	m := map[string]string{}
	note := func(key string, names []string) {
		m[key] = "no endpoint exports " + strings.Join(names, ", ") + absentNote
	}
	if !found(func(c endpointCalc) bool { return c.hit.ok }) && st[gaugeHitRate].n == 0 {
		note("server_hit_rate", append(ratioNames(hitRatioSources), gaugeNames(hitGaugeSources)...))
	}
	if !found(func(c endpointCalc) bool { return c.spec.ok }) {
		note("spec_accept_rate", ratioNames(specRatioSources))
	}
	for _, k := range []struct {
		key  string
		srcs []source
		has  func(endpointCalc) bool
	}{
		{"preemptions", preemptionSources, func(c endpointCalc) bool { return c.preemptions.ok }},
		{"prompt_tokens", promptTokenSources, func(c endpointCalc) bool { return c.prompt.ok }},
		{"generation_tokens", generationTokenSources, func(c endpointCalc) bool { return c.gen.ok }},
		{"requests", requestSources, func(c endpointCalc) bool { return c.requests.ok }},
		{"server_ttft", ttftSources, func(c endpointCalc) bool { return c.ttft.ok }},
		{"server_itl", itlSources, func(c endpointCalc) bool { return c.itl.ok }},
		{"server_queue_time", queueTimeSources, func(c endpointCalc) bool { return c.queue.ok }},
	} {
		if !found(k.has) {
			note(k.key, sourceNames(k.srcs))
		}
	}
	for key, g := range map[string]gaugeFigure{"queue": gaugeQueue, "running": gaugeRunning, "kv_usage": gaugeKVUsage} {
		if st[g].n == 0 {
			note(key, gaugeNames(gaugeFigureSources[g]))
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func sourceNames(srcs []source) []string {
	out := make([]string, len(srcs))
	for i, s := range srcs {
		out[i] = s.name
	}
	return out
}

func gaugeNames(srcs []gaugeSource) []string {
	out := make([]string, len(srcs))
	for i, g := range srcs {
		out[i] = g.name
	}
	return out
}

func ratioNames(srcs []ratioSource) []string {
	out := make([]string, len(srcs))
	for i, r := range srcs {
		out[i] = r.num.name + " / " + r.den.name
	}
	return out
}
