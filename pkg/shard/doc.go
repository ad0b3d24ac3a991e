// Package shard decides which agent runs which conversation and how a
// level's concurrency is split across agents. Every rule is a pure function
// of its arguments, so an agent computes its own shard from its index and
// the member list, and the coordinator computes the same answer. It imports
// no other fleetbench package, does no I/O and holds no global state.
//
// Conversations are owned by rendezvous (highest random weight) hashing over
// the live agent indices: when an agent leaves, only its conversations move,
// each to the survivor that weighs it highest; when one joins, it takes about
// 1/n of the conversations and nothing else moves. A level change moves no
// conversation at all; only the concurrency shares change.
package shard
