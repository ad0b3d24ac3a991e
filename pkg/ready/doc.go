// Package ready decides when a serving stack is really ready to be measured,
// and measures which of its readiness signals can be trusted. It owns the
// wait after a routing-mode switch, not the switch (pkg/sweep's switches)
// nor the measurement that follows (the sweep runner's). It must not import
// the sweep, fleet/ or the coordinator, and never logs the API key it sends.
//
// Gate is the wait after every routing-mode switch of a sweep: /health (when
// the server has one), /v1/models listing the model, then K real streamed
// completions in a row with stable TTFT, then a few short priming
// conversations. A listed model is not a served model: Dynamo's frontend
// lists a model as soon as a worker registers, before it can serve, and a
// sweep that starts then measures the tail of a startup.
//
// Probe answers, with data from one startup, whether /v1/models (or
// /health/ready) is a sound readiness probe for a given stack.
package ready
