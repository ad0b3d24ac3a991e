// Package wire converts the domain types that the coordinator and its agents
// both send (today: the workload) to and from their protobuf messages, and
// the goodput objectives. It is the one place outside coordinator/ and
// agent/ that imports the generated code, so both ends encode a workload the
// same way. pkg/ packages must not import it: the domain types stay free of
// generated code.
package wire
