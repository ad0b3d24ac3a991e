// Package ui is fleetbench's live dashboard: a page served at /ui on the
// metrics port of run, sweep and coordinator (docs/dashboard.md), its
// server-sent-events feed (/ui/events) of the Feed's snapshots, the
// concurrency slider's endpoint (/ui/concurrency) and the baseline reference
// lines (/ui/baseline). It owns presentation only: it changes the load
// solely through the Controller it is given and must not import fleet/,
// coordinator/ or agent/. The page and its script are embedded: nothing is
// loaded from elsewhere, so it works air-gapped through kubectl
// port-forward.
package ui
