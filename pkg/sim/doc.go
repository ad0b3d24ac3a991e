// Package sim is fleetbench's built-in inference simulator: an
// OpenAI-compatible server that stands in for a serving stack of a router
// ("frontend") and several replicas ("workers"), realistic enough that
// KV-cache-aware routing and round-robin give different, believable results.
// It must not import the measurement side (pkg/client, record, load,
// workload, result, hdr, sse; scripts/check-imports.sh), so agents cannot
// know they talk to it and it cannot cheat by sharing state with them;
// pkg/openai's wire types are all it shares.
//
// Each worker runs one engine loop with a paged KV cache and prefix caching
// by chained block hashes, continuous batching with a token budget and
// chunked prefill, and a step time that grows with prefill tokens and
// decoding sequences; requests that do not fit wait in a queue. The frontend
// routes in one of several modes, switchable at runtime; the kv mode sees
// worker caches only through delayed stored/removed block events. Metrics
// use vLLM's and Dynamo's names. Clients cannot tell they are talking to a
// simulator, except by the X-Fleetbench-Worker response header. The HTTP
// side is split by concern: server.go (routes, health), request.go (decoding
// and admitting a request), response.go (unary and streamed bodies),
// admin.go (/admin endpoints).
package sim
