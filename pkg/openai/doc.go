// Package openai holds the wire types of the OpenAI-compatible HTTP API that
// fleetbench speaks as a client and that the built-in simulator serves: chat
// completions, completions, streaming chunks, usage and error bodies. It
// owns the JSON shapes and nothing else. It must not import another
// fleetbench package, so that both the measurement side and the simulator
// can share it without seeing each other.
//
// The types carry no behaviour and are safe to share between goroutines once
// built; nothing in this package does I/O.
package openai
