package client

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// DefaultWorkerHeaders are the response headers that name the worker that
// served a request, tried in order: the built-in simulator's and llm-d's
// (its inference simulator and gateway examples set it to the serving
// pod's name). Dynamo's frontend sends none (docs/server-metrics.md).
var DefaultWorkerHeaders = []string{DefaultWorkerHeader, "X-Inference-Pod"}

// WorkerHeaders returns the headers tried for the serving worker: first
// (when set), then DefaultWorkerHeaders, each once.
func WorkerHeaders(first string) []string {
	out := make([]string, 0, len(DefaultWorkerHeaders)+1)
	if first != "" {
		out = append(out, first)
	}
	for _, h := range DefaultWorkerHeaders {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, h) }) {
			out = append(out, h)
		}
	}
	return out
}

// workerFrom returns the value of the first of names present in h and
// that name, or "" and "".
func workerFrom(h http.Header, names []string) (worker, header string) {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v, n
		}
	}
	return "", ""
}

// CheckWorkerHeader reports a --worker-header that is not a valid HTTP
// header name ("" is valid: the defaults alone).
func CheckWorkerHeader(name string) error {
	if name != "" && !validHeaderName(name) {
		return fmt.Errorf("worker header %q is not a valid HTTP header name", name)
	}
	return nil
}
