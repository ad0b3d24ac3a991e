// Package promtest runs a real Prometheus server for fleetbench's tests:
// Debian's prometheus package (scripts/prometheus.sh install), started on
// loopback with a data directory of the test's own, scraping the targets a
// test names, and queried through its HTTP API. Only tests import it; it
// listens on 127.0.0.1 only.
//
//	bin := promtest.Binary(t)
//	srv := promtest.Start(t, bin, promtest.Options{Targets: map[string]string{"fleetbench": addr}, Native: true})
//	samples, err := srv.Query(ctx, `sum(fleetbench_requests_total)`, time.Now())
//
// Without the binary Binary skips the test, unless
// FLEETBENCH_REQUIRE_PROMETHEUS=1, as `make test` sets, in which case it
// fails. The server is stopped when the test ends.
package promtest
