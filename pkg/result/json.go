package result

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// VLLMKeys returns the result.json keys vLLM's `vllm bench serve
// --save-result` writes for s (without --save-detailed, goodput or ramp-up),
// in vLLM's order. The metric keys follow --percentile-metrics
// ttft,tpot,itl,e2el and s.Percentiles.
func VLLMKeys(s *Summary) []string {
	var keys []string
	for _, f := range s.vllmFields() {
		keys = append(keys, f.k)
	}
	return keys
}

// WriteJSON writes s as one JSON object laid out as Python's json.dump
// writes vLLM's result (one line, ", " and ": " separators, floats as
// Python's repr spells them, no trailing newline): vLLM's keys in vLLM's
// order, then fleetbench's keys. Non-finite floats are written as null
// (Python would write the invalid NaN/Infinity). WriteJSON makes one Write
// call.
func WriteJSON(w io.Writer, s *Summary) error {
	var b bytes.Buffer
	if err := writeObject(&b, append(s.vllmFields(), s.ownFields()...)); err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// WriteJSONFile writes result.json atomically: to a temporary file in the
// same directory, synced, then renamed over path.
func WriteJSONFile(path string, s *Summary) error {
	var b bytes.Buffer
	if err := WriteJSON(&b, s); err != nil {
		return err
	}
	return writeFileAtomic(path, b.Bytes())
}

func writeFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp result: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write temp result: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync temp result: %w", err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod temp result: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close temp result: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename result: %w", err)
	}
	return nil
}

// field is one key of an ordered JSON object.
type field struct {
	k string
	v any
}

// object is an ordered JSON object.
type object []field

// vllmFields are vLLM's keys in the order its main_async and benchmark
// build result_json.
func (s *Summary) vllmFields() object {
	var label any
	if s.Label != "" {
		label = s.Label
	}
	var rate any = s.RequestRate
	if math.IsInf(s.RequestRate, 1) {
		rate = "inf"
	}
	var goodput any
	if !s.SLO.IsZero() {
		goodput = s.RequestGoodput
	}
	var maxConc any
	if s.MaxConcurrency > 0 {
		maxConc = s.MaxConcurrency
	}
	o := object{
		{"date", s.End.Format("20060102-150405")},
		{"endpoint_type", s.Backend},
		{"backend", s.Backend},
		{"label", label},
		{"model_id", s.Model},
		{"tokenizer_id", s.Tokenizer},
		// vLLM's --num-prompts; fleetbench runs for a duration, so this is
		// the number of turns sent in the measurement window.
		{"num_prompts", s.Completed + s.Failed},
	}
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		o = append(o, field{k, s.Metadata[k]})
	}
	o = append(o, object{
		{"request_rate", rate},
		{"burstiness", s.Burstiness},
		{"max_concurrency", maxConc},
		{"duration", s.Duration.Seconds()},
		{"completed", s.Completed},
		{"failed", s.Failed},
		{"total_input_tokens", s.TotalInputTokens},
		{"total_output_tokens", s.TotalOutputTokens},
		{"request_throughput", s.RequestThroughput},
		{"request_goodput", goodput},
		{"output_throughput", s.OutputThroughput},
		{"total_token_throughput", s.TotalTokenThroughput},
		{"max_output_tokens_per_s", s.PeakOutputTokensPerSec},
		{"max_concurrent_requests", s.PeakConcurrentRequests},
	}...)
	for _, st := range []Stats{s.TTFT, s.TPOT, s.ITL, s.E2EL} {
		o = append(o,
			field{"mean_" + st.Key + "_ms", st.Mean},
			field{"median_" + st.Key + "_ms", st.Median},
			field{"std_" + st.Key + "_ms", st.Std},
		)
		for _, p := range st.Percentiles {
			o = append(o, field{"p" + pWord(p.P) + "_" + st.Key + "_ms", p.Ms})
		}
	}
	return o
}

// ownFields are fleetbench's keys; none collides with a vLLM key.
func (s *Summary) ownFields() object {
	turn := func(g TurnGroup) object {
		return object{
			{"requests", g.Requests},
			{"p50_ms", g.P50},
			{"p95_ms", g.P95},
			{"p99_ms", g.P99},
			{"kv_hit_rate", g.HitRate},
		}
	}
	byTurn := object{{"first", turn(s.FirstTurn)}, {"later", turn(s.LaterTurns)}}
	for _, g := range s.ByTurn {
		byTurn = append(byTurn, field{strconv.Itoa(g.First), turn(g)})
	}
	errs := object{}
	for _, e := range s.ErrorsByClass {
		errs = append(errs, field{string(e.Class), e.Count})
	}
	var top []any
	for _, e := range s.TopErrors {
		top = append(top, object{
			{"class", string(e.Class)}, {"message", e.Message}, {"example", e.Example},
			{"count", e.Count}, {"first", rfc3339(e.First)},
		})
	}
	clamped := object{}
	for _, c := range s.Clamped {
		clamped = append(clamped, field{c.Metric, c.Count})
	}
	o := object{
		{"fleetbench_version", s.Version},
		{"workload", s.Workload},
		{"target", s.Target},
		{"start_time", rfc3339(s.Start)},
		{"end_time", rfc3339(s.End)},
		{"percentile_source", "hdr"},
		{"hdr_lowest_us", s.HDR.LowestMicros},
		{"hdr_highest_us", s.HDR.HighestMicros},
		{"hdr_significant_figures", s.HDR.SigFigs},
		{"kv_hit_rate", s.HitRate},
		{"kv_hit_request_share", s.HitRequestShare},
		{"total_cached_tokens", s.CachedTokens},
		{"usage_missing", s.UsageMissing},
		{"finish_reasons", finishFields(s.FinishReasons)},
		{"ttft_by_turn", byTurn},
		{"ttft_intended_p50_ms", s.TTFTIntendedP50},
		{"ttft_intended_p99_ms", s.TTFTIntendedP99},
		{"e2el_intended_p99_ms", s.E2EIntendedP99},
		{"lag_p50_ms", s.LagP50},
		{"lag_p99_ms", s.LagP99},
		{"late_sends", s.LateSends},
		{"dropped_sends", s.Dropped},
		{"errors_by_class", errs},
		{"top_errors", top},
		{"clamped_samples", clamped},
		{"conversations_started", s.ConversationsStarted},
		{"conversations_completed", s.ConversationsCompleted},
		{"restarted_turns", s.Restarted},
		{"fallbacks", s.Fallbacks},
	}
	if s.Balance.Workers > 0 {
		per := object{}
		for _, name := range slices.Sorted(maps.Keys(s.Workers)) {
			per = append(per, field{name, s.Workers[name].Requests})
		}
		o = append(o, field{"client_requests_per_worker", per})
		for _, f := range []struct {
			key string
			v   *float64
		}{{"client_worker_skew", s.Balance.RequestSkew}, {"client_worker_cv", s.Balance.RequestCV}} {
			var v any
			if f.v != nil {
				v = *f.v
			}
			o = append(o, field{f.key, v})
		}
	}
	if len(s.AgentNotes) > 0 {
		notes := make([]any, len(s.AgentNotes))
		for i, n := range s.AgentNotes {
			notes[i] = n
		}
		o = append(o, field{"agent_notes", notes})
	}
	if s.FinishWarning != "" {
		o = append(o, field{"finish_warning", s.FinishWarning})
	}
	if s.WorkerHeaderNote != "" {
		o = append(o, field{"worker_header_warning", s.WorkerHeaderNote})
	}
	if s.Server != nil {
		o = append(o, serverFields(s.Server)...)
	}
	if !s.SLO.IsZero() {
		// The goodput objectives and the share of requests meeting them.
		o = append(o, field{"goodput_slo", s.SLO.String()}, field{"slo_attainment", s.SLOAttainment})
	}
	if s.Stopped != "" {
		o = append(o, field{"stopped", s.Stopped})
	}
	if s.Interrupted {
		// Last, where readers of earlier results found it.
		o = append(o, field{"interrupted", true})
	}
	return o
}

// rfc3339 is t in UTC as RFC 3339 with nanoseconds, or null when unset.
func rfc3339(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// writeObject writes o as json.dump does, with ", " and ": " separators.
func writeObject(b *bytes.Buffer, o object) error {
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteString(", ")
		}
		if err := writeValue(b, f.k); err != nil {
			return err
		}
		b.WriteString(": ")
		if err := writeValue(b, f.v); err != nil {
			return fmt.Errorf("key %s: %w", f.k, err)
		}
	}
	b.WriteByte('}')
	return nil
}

func writeValue(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case object:
		return writeObject(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeValue(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b.WriteString("null")
		} else {
			b.WriteString(pyFloat(v))
		}
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		writeString(b, v)
	default:
		return fmt.Errorf("unsupported JSON value %T", v)
	}
	return nil
}

// writeString writes v as json.dump does with its default ensure_ascii:
// the short escapes for '"', '\\' and \b \f \n \r \t, lower-case \u00xx for
// other control characters, and \uxxxx (surrogate pairs above U+FFFF) for
// everything beyond ASCII. Unlike encoding/json it leaves <, > and & alone.
// Invalid UTF-8 is written as U+FFFD.
func writeString(b *bytes.Buffer, v string) {
	b.WriteByte('"')
	for _, r := range v {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || (r >= 0x7f && r <= 0xffff):
			fmt.Fprintf(b, `\u%04x`, r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat spells a finite float as Python's repr does: the shortest
// round-trip digits, fixed notation with at least one decimal for
// 1e-4 <= |v| < 1e16, otherwise scientific with a signed exponent of at
// least two digits (1e-05, 1.5e+16).
func pyFloat(v float64) string {
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(v, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp >= -4 && exp < 16 {
		f := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsRune(f, '.') {
			f += ".0"
		}
		return f
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}

// ErrMetadataKey is wrapped by CheckMetadata's errors.
var ErrMetadataKey = errors.New("metadata key")

// CheckMetadata reports a --metadata key that result.json already has (it
// would hide a figure) or that is empty.
func CheckMetadata(md map[string]string) error {
	if len(md) == 0 {
		return nil
	}
	own := map[string]bool{}
	var s Summary
	s.TTFT.Key, s.TPOT.Key, s.ITL.Key, s.E2EL.Key = "ttft", "tpot", "itl", "e2el"
	for _, f := range append(s.vllmFields(), s.ownFields()...) {
		own[f.k] = true
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(md)) {
		switch {
		case strings.TrimSpace(k) == "":
			errs = append(errs, fmt.Errorf("%w: empty", ErrMetadataKey))
		case own[k] || strings.HasSuffix(k, "_ms") && (strings.Contains(k, "ttft") || strings.Contains(k, "tpot") || strings.Contains(k, "itl") || strings.Contains(k, "e2el")):
			errs = append(errs, fmt.Errorf("%w %q: result.json has that key already", ErrMetadataKey, k))
		}
	}
	return errors.Join(errs...)
}
