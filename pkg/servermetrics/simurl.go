package servermetrics

import (
	"errors"
	"slices"
	"strings"
)

// SimEndpoint, given as an endpoint, stands for the /metrics page of the
// built-in simulator that the command runs in-process (a `run` without
// --target, a sweep with `sim:`), whose address is known only once it has
// started.
const SimEndpoint = "sim"

// ErrNoSim is returned by ResolveSim when the endpoints name SimEndpoint
// but no simulator runs in-process.
var ErrNoSim = errors.New(`scrape endpoint "sim" names the in-process simulator, and none runs (no --target, or a sweep's sim:)`)

// UsesSim reports whether c names SimEndpoint.
func (c Config) UsesSim() bool { return slices.Contains(c.Endpoints, SimEndpoint) }

// ResolveSim returns c with SimEndpoint replaced by the /metrics page of
// the simulator at simURL (its base URL, "http://host:port"). It returns
// ErrNoSim when c names SimEndpoint and simURL is "". c is not changed.
func (c Config) ResolveSim(simURL string) (Config, error) {
	if !c.UsesSim() {
		return c, nil
	}
	if simURL == "" {
		return c, ErrNoSim
	}
	eps := slices.Clone(c.Endpoints)
	for i, e := range eps {
		if e == SimEndpoint {
			eps[i] = strings.TrimSuffix(simURL, "/") + "/metrics"
		}
	}
	c.Endpoints = eps
	return c, nil
}
