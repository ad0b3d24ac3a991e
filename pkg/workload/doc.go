// Package workload produces the conversations fleetbench sends: synthetic
// document chats, ShareGPT files and scripted JSONL replays. Every
// conversation is a pure function of (seed, conversation index), so two runs
// with the same seed send the same user turns. It owns what is sent, not
// when (pkg/load) nor how it is measured (pkg/client). It does no network
// I/O and must not import the load engine or the simulator.
package workload
