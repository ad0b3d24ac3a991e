// Package client sends streaming requests to an OpenAI-compatible server
// (POST /v1/chat/completions or /v1/completions with stream: true) and
// measures each one into a Result: TTFB, TTFT, inter-token latencies, E2E,
// token usage and, on failure, one error Class. It owns one request's
// measurement; aggregating Results is pkg/record's job. It imports only the
// wire types (pkg/openai) and the SSE reader (pkg/sse) of fleetbench's own,
// must not be imported by the simulator, and never logs the API key.
//
// Every duration is measured with Go's monotonic clock from Result.Start, the
// instant just before the request is handed to the HTTP transport. HTTP/1.1,
// the default, has a transport of its own (h1.go) built for thousands of
// concurrent streams to one host: a connection pool without per-connection
// goroutines and, on Linux for plain HTTP, event loops that read every
// stream and handle each token as its bytes are read (loop_linux.go);
// otherwise each stream is read on its own goroutine. HTTP/2 uses
// net/http's transport.
package client
