package result

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// FinishCount is the number of successful requests that ended with one
// finish_reason (record.FinishReasonOf's keys).
type FinishCount struct {
	Reason string
	Count  int64
}

// finishOrder is the order finish reasons are printed in.
var finishOrder = []string{"stop", "length", "content_filter", "tool_calls", record.FinishOther, record.FinishNone}

// finishCounts lists the non-zero counts of m in finishOrder.
func finishCounts(m map[string]int64) []FinishCount {
	var out []FinishCount
	for _, r := range finishOrder {
		if n := m[r]; n > 0 {
			out = append(out, FinishCount{Reason: r, Count: n})
		}
	}
	return out
}

// FinishText is "stop 85, length 15": the non-zero counts of finish
// (record.Counters.FinishReasons) in a fixed order.
func FinishText(finish map[string]int64) string { return finishText(finishCounts(finish)) }

// finishText is "stop 85, length 15".
func finishText(fc []FinishCount) string {
	parts := make([]string, len(fc))
	for i, f := range fc {
		parts[i] = fmt.Sprintf("%s %d", f.Reason, f.Count)
	}
	return strings.Join(parts, ", ")
}

// EarlyStopShare is the threshold of EarlyStopWarning: more than half of
// the successful requests ending with finish_reason "stop".
const EarlyStopShare = 0.5

// EarlyStopWarning says, when most successful requests of a window ended
// with finish_reason "stop" (the model ended its answer before the
// max_tokens it was sent), that the answers were shorter than the
// workload asked for, and how to get the intended lengths; "" otherwise.
// docchat and a ShareGPT run with output lengths size each turn with
// max_tokens and assume the server generates to it; with --natural-stop,
// or a workload without lengths, stopping is expected.
func EarlyStopWarning(finish map[string]int64) string {
	if _, early := StoppedEarly(finish); !early {
		return ""
	}
	var total int64
	for _, n := range finish {
		total += n
	}
	stop := finish["stop"]
	return fmt.Sprintf("%.0f%% of answers (%d of %d) ended with finish_reason \"stop\", before the max_tokens they were sent: "+
		"they are shorter than the workload asked for (expected with --natural-stop). To get the intended lengths, %s",
		100*float64(stop)/float64(total), stop, total, IgnoreEOSHint)
}

// IgnoreEOSHint says how to make a server generate to max_tokens.
const IgnoreEOSHint = `send "ignore_eos": true in the request body (run: --extra-body '{"ignore_eos": true}'), which vLLM and SGLang accept`

// StoppedEarly reports whether most of the successful requests counted in
// finish (record.Counters.FinishReasons) ended with finish_reason "stop",
// and their share.
func StoppedEarly(finish map[string]int64) (share float64, early bool) {
	var total int64
	for _, n := range finish {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	share = float64(finish["stop"]) / float64(total)
	return share, share > EarlyStopShare
}

// WorkerHeaderNote says, when --worker-header named asked and no
// successful response carried it, that it was never seen and which
// header named the workers instead (seen: record.Counters.WorkerHeaders),
// or that none did; "" when asked is empty, was seen, or no request
// succeeded.
func WorkerHeaderNote(asked string, seen map[string]int64, completed int64) string {
	if asked == "" || completed == 0 {
		return ""
	}
	var used []string
	for _, h := range countedKeys(seen) {
		if strings.EqualFold(h, asked) {
			return ""
		}
		used = append(used, fmt.Sprintf("%s (%d responses)", h, seen[h]))
	}
	if len(used) == 0 {
		return fmt.Sprintf("--worker-header %s was never seen in %d successful responses, and no default header named a worker", asked, completed)
	}
	return fmt.Sprintf("--worker-header %s was never seen in %d successful responses; workers were named by %s", asked, completed, strings.Join(used, ", "))
}

// countedKeys returns m's keys with a non-zero count, sorted.
func countedKeys(m map[string]int64) []string {
	var out []string
	for k, n := range m {
		if n > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// finishFields is result.json's finish_reasons object, in finishOrder.
func finishFields(fc []FinishCount) object {
	o := object{}
	for _, f := range fc {
		o = append(o, field{f.Reason, f.Count})
	}
	return o
}
