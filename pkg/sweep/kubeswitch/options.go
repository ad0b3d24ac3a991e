package kubeswitch

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// optionSet reads a switch's Options, remembering which keys were read so
// that finish can report a key no kind knows (a misspelling would otherwise
// be ignored silently) and every bad value at once.
type optionSet struct {
	m    map[string]string
	used map[string]bool
	errs []error
}

func newOptionSet(m map[string]string) *optionSet {
	return &optionSet{m: m, used: map[string]bool{}}
}

func (o *optionSet) errorf(format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf(format, args...))
}

// str returns the trimmed value of key, or def when it is unset or empty.
func (o *optionSet) str(key, def string) string {
	o.used[key] = true
	if v := strings.TrimSpace(o.m[key]); v != "" {
		return v
	}
	return def
}

// raw returns the value of key untrimmed (patch templates keep their
// layout), or "".
func (o *optionSet) raw(key string) string {
	o.used[key] = true
	return o.m[key]
}

// required is str that records an error when key is unset.
func (o *optionSet) required(key, example string) string {
	v := o.str(key, "")
	if v == "" {
		o.errorf("option %s is required, e.g. %s: %s", key, key, example)
	}
	return v
}

func (o *optionSet) boolean(key string, def bool) bool {
	v := o.str(key, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		o.errorf("option %s: %q is not true or false", key, v)
		return def
	}
	return b
}

func (o *optionSet) duration(key string, def time.Duration) time.Duration {
	v := o.str(key, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		o.errorf("option %s: %q is not a positive Go duration such as 90s or 15m", key, v)
		return def
	}
	return d
}

// oneOf returns the value of key, which must be one of allowed; def when
// unset.
func (o *optionSet) oneOf(key, def string, allowed ...string) string {
	v := o.str(key, def)
	if !slices.Contains(allowed, v) {
		o.errorf("option %s: %q is not one of %s", key, v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

// list splits a comma-separated value into its trimmed, non-empty parts.
func (o *optionSet) list(key string) []string {
	var out []string
	for p := range strings.SplitSeq(o.str(key, ""), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// values parses the mode-to-value map of key over def.
func (o *optionSet) values(key string, def map[string]string) valueMap {
	v := o.str(key, "")
	if v == "" {
		return valueMap(def)
	}
	m, err := parseValues(v)
	if err != nil {
		o.errorf("option %s: %w", key, err)
		return valueMap(def)
	}
	return m
}

// finish reports unknown keys and every bad value, joined.
func (o *optionSet) finish() error {
	for _, k := range slices.Sorted(maps.Keys(o.m)) {
		if !o.used[k] {
			known := slices.Sorted(maps.Keys(o.used))
			o.errs = append(o.errs, fmt.Errorf("unknown option %q (known: %s)", k, strings.Join(known, ", ")))
		}
	}
	return errors.Join(o.errs...)
}

// valueMap maps sweep mode names to what the serving stack calls them
// (kv -> kv, round_robin -> round-robin). A mode it does not name passes
// through unchanged, so a stack's own value (say "random") can be used as a
// mode name directly, and a value read back that no mode maps to still
// restores correctly.
type valueMap map[string]string

// parseValues parses "kv=kv,round_robin=round-robin". Two modes may not
// map to the same value, or Current could not tell which mode is set.
func parseValues(s string) (valueMap, error) {
	m := valueMap{}
	seen := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		mode, val, ok := strings.Cut(pair, "=")
		mode, val = strings.TrimSpace(mode), strings.TrimSpace(val)
		if !ok || mode == "" || val == "" {
			return nil, fmt.Errorf("%q: want MODE=VALUE pairs separated by commas, e.g. kv=kv,round_robin=round-robin", pair)
		}
		if _, dup := m[mode]; dup {
			return nil, fmt.Errorf("mode %q is mapped twice", mode)
		}
		if other, dup := seen[val]; dup {
			return nil, fmt.Errorf("modes %q and %q both map to %q", other, mode, val)
		}
		m[mode], seen[val] = val, mode
	}
	if len(m) == 0 {
		return nil, errors.New("no MODE=VALUE pair")
	}
	return m, nil
}

// value returns what mode is called by the stack.
func (m valueMap) value(mode string) string {
	if v, ok := m[mode]; ok {
		return v
	}
	return mode
}

// mode returns the mode whose value is v; v itself when none maps to it.
func (m valueMap) mode(v string) string {
	for mode, val := range m {
		if val == v {
			return mode
		}
	}
	return v
}

// checkFields rejects the SwitchSpec fields of built-in kinds, which these
// kinds would otherwise ignore; allowed names the JSON fields a kind reads
// (besides options).
func checkFields(c sweep.SwitchSpec, allowed ...string) error {
	err := c.OnlyFields(append(allowed, "options")...)
	if fe := (*sweep.FieldError)(nil); errors.As(err, &fe) {
		return fmt.Errorf("%w (its settings go in options)", err)
	}
	return err
}

// jsonInner returns s escaped for use inside a JSON string literal, without
// the quotes, so a value substituted into a patch template cannot break it.
func jsonInner(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b[1 : len(b)-1])
}
