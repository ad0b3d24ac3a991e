package servermetrics

import (
	"slices"
	"testing"
)

// TestCatalogueHoldsEverySource: every name a figure is read from is in the
// catalogue, so that newPage keeps its series. A source missing from it is
// never read, and the figure is reported absent though the server exports it
// (as the queue-time histogram once was).
func TestCatalogueHoldsEverySource(t *testing.T) {
	var names []string
	for _, r := range slices.Concat(hitRatioSources, specRatioSources) {
		names = append(names, r.num.name, r.den.name)
	}
	for _, gs := range [][]gaugeSource{hitGaugeSources, queueSources, runningSources, kvUsageSources} {
		for _, g := range gs {
			names = append(names, g.name)
		}
	}
	for _, ss := range [][]source{preemptionSources, promptTokenSources, generationTokenSources, requestSources,
		ttftSources, itlSources, queueTimeSources} {
		for _, s := range ss {
			names = append(names, s.name)
		}
	}
	for _, n := range names {
		if !catalogue[n] {
			t.Errorf("%s is read by a figure but not in the catalogue: newPage drops it", n)
		}
	}
}
