// Package bundle moves a run's output directory off a cluster: the
// coordinator serves it as a gzipped tar on its metrics port, and
// `fleetbench fetch` downloads it through the API server and unpacks it. The
// coordinator's image is distroless (no tar, no shell), so `kubectl cp`
// cannot copy it. It imports no other fleetbench package and must not write
// outside the directory it is given to unpack into.
package bundle
