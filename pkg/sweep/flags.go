package sweep

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// specFlag is a flag that records what the user typed; ApplyFlags applies it
// to a Spec after the file is loaded. Keeping the raw values (rather than
// writing into a Spec at parse time) is what lets flags override the file
// while unset flags leave it alone.
type specFlag struct {
	def    string
	isBool bool
	vals   []string // every Set, in order (repeatable flags use all)
	apply  func(s *Spec, vals []string) error
}

func (f *specFlag) String() string {
	if f == nil {
		return ""
	}
	if len(f.vals) > 0 {
		return f.vals[len(f.vals)-1]
	}
	return f.def
}

func (f *specFlag) Set(v string) error {
	f.vals = append(f.vals, v)
	return nil
}

// IsBoolFlag lets boolean flags be given without a value.
func (f *specFlag) IsBoolFlag() bool { return f.isBool }

// flagDef is one spec flag: its name, help, default shown in help, and how
// it sets the Spec.
type flagDef struct {
	name, usage string
	def         func(d *Spec) string
	isBool      bool
	apply       func(s *Spec, vals []string) error
}

// last applies the last value given with parse.
func last[T any](parse func(string) (T, error), set func(*Spec, T)) func(*Spec, []string) error {
	return func(s *Spec, vals []string) error {
		v, err := parse(vals[len(vals)-1])
		if err != nil {
			return err
		}
		set(s, v)
		return nil
	}
}

func parseString(v string) (string, error) { return v, nil }
func parseInt(v string) (int, error)       { return strconv.Atoi(strings.TrimSpace(v)) }
func parseInt64(v string) (int64, error)   { return strconv.ParseInt(strings.TrimSpace(v), 10, 64) }
func parseFloat(v string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(v), 64) }
func parseBool(v string) (bool, error)     { return strconv.ParseBool(strings.TrimSpace(v)) }
func parseDuration(v string) (Duration, error) {
	var d Duration
	err := d.UnmarshalText([]byte(v))
	return d, err
}

// parseInts parses "20,30,40" (spaces allowed).
func parseInts(v string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseList parses "a,b" into names.
func parseList(v string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

// onSwitches applies set to the default switch and to every mode's own
// switch, so a --switch-* flag overrides the file wherever that setting
// lives.
func onSwitches[T any](parse func(string) (T, error), set func(*SwitchSpec, T)) func(*Spec, []string) error {
	return last(parse, func(s *Spec, v T) {
		if s.Switch == nil {
			s.Switch = &SwitchSpec{}
		}
		set(s.Switch, v)
		for i := range s.Modes {
			if s.Modes[i].Switch != nil {
				set(s.Modes[i].Switch, v)
			}
		}
	})
}

// userModel returns the spec's user model, adding one if it has none.
func userModel(s *Spec) *UserModel {
	if s.Workload.UserModel == nil {
		s.Workload.UserModel = &UserModel{}
	}
	return s.Workload.UserModel
}

func durDef(get func(*Spec) Duration) func(*Spec) string {
	return func(d *Spec) string { return get(d).String() }
}

func flagDefs() []flagDef {
	return []flagDef{
		{name: "target", usage: "base URL of the OpenAI-compatible server",
			apply: last(parseString, func(s *Spec, v string) { s.Target = v })},
		{name: "model", usage: "model name to request and wait for",
			apply: last(parseString, func(s *Spec, v string) { s.Model = v })},
		{name: "api-key-env", usage: "name of the environment variable holding the API key",
			apply: last(parseString, func(s *Spec, v string) { s.APIKeyEnv = v })},
		{name: "endpoint", usage: "endpoint: chat or completions", def: func(d *Spec) string { return d.Endpoint },
			apply: last(parseString, func(s *Spec, v string) { s.Endpoint = v })},

		{name: "workload", usage: "workload: docchat, sharegpt or jsonl", def: func(d *Spec) string { return d.Workload.Kind },
			apply: last(parseString, func(s *Spec, v string) { s.Workload.Kind = v })},
		{name: "dataset", usage: "dataset file (sharegpt, jsonl) or documents directory (docchat)",
			apply: last(parseString, func(s *Spec, v string) { s.Workload.Dataset = v })},
		{name: "turns", usage: "user turns per conversation: N or MIN-MAX (sharegpt: cap)", def: func(d *Spec) string { return d.Workload.Turns },
			apply: last(parseString, func(s *Spec, v string) { s.Workload.Turns = v })},
		{name: "prompt-tokens", usage: "docchat: first prompt size in tokens (0: workload default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Workload.PromptTokens = v })},
		{name: "documents", usage: "docchat: number of starter documents (0: workload default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Workload.Documents = v })},
		{name: "max-tokens", usage: "max_tokens of each turn unless the workload sets one", def: func(d *Spec) string { return strconv.Itoa(d.Workload.MaxTokens) },
			apply: last(parseInt, func(s *Spec, v int) { s.Workload.MaxTokens = v })},
		{name: "think-time", usage: "pause before each later turn: none, a duration (2s) or exp:MEAN", def: func(d *Spec) string { return d.Workload.ThinkTime.String() },
			apply: func(s *Spec, vals []string) error { return s.Workload.ThinkTime.Set(vals[len(vals)-1]) }},
		{name: "seed", usage: "seed of the workload",
			apply: last(parseInt64, func(s *Spec, v int64) { s.Workload.Seed = v })},
		{name: "max-conversations", usage: "sharegpt: keep at most N conversations (0: all)",
			apply: last(parseInt, func(s *Spec, v int) { s.Workload.MaxConversations = v })},
		{name: "min-messages", usage: "sharegpt: drop conversations with fewer messages",
			apply: last(parseInt, func(s *Spec, v int) { s.Workload.MinMessages = v })},
		{name: "session-header", usage: "request header carrying a per-conversation session id",
			apply: last(parseString, func(s *Spec, v string) { s.Workload.SessionHeader = v })},
		{name: "user-model-url", usage: "docchat: base URL of a model that writes follow-up questions",
			apply: last(parseString, func(s *Spec, v string) { userModel(s).URL = v })},
		{name: "user-model", usage: "docchat: the user model's name",
			apply: last(parseString, func(s *Spec, v string) { userModel(s).Model = v })},
		{name: "user-model-key-env", usage: "docchat: environment variable holding the user model's API key",
			apply: last(parseString, func(s *Spec, v string) { userModel(s).APIKeyEnv = v })},

		{name: "levels", usage: "concurrency levels, comma-separated, e.g. 20,40,80",
			apply: last(parseInts, func(s *Spec, v []int) { s.Levels = v })},
		{name: "request-rate", usage: "open loop: mean arrivals per second at every level (0: closed loop)",
			apply: last(parseFloat, func(s *Spec, v float64) { s.RequestRate = v })},
		{name: "modes", usage: "routing modes, comma-separated, e.g. kv,round_robin (modes named in the file keep their switch)",
			apply: last(parseList, func(s *Spec, names []string) {
				modes := make([]Mode, 0, len(names))
				for _, n := range names {
					m := Mode{Name: n}
					for _, old := range s.Modes {
						if old.Name == n {
							m = old
						}
					}
					modes = append(modes, m)
				}
				s.Modes = modes
			})},
		{name: "baseline", usage: "mode reports treat as the baseline (default: the first mode)",
			apply: last(parseString, func(s *Spec, v string) { s.Baseline = v })},
		{name: "candidate", usage: "mode reports compare with the baseline (default: the second mode)",
			apply: last(parseString, func(s *Spec, v string) { s.Candidate = v })},

		{name: "switch", usage: "how modes are switched, for all modes: none, exec, http, sim or a registered kind",
			apply: onSwitches(parseString, func(c *SwitchSpec, v string) { c.Kind = v })},
		{name: "switch-url", usage: "http: request URL template with {mode}; sim: simulator URL (default: target)",
			apply: onSwitches(parseString, func(c *SwitchSpec, v string) { c.URL = v })},
		{name: "switch-method", usage: "http: request method (default POST)",
			apply: onSwitches(parseString, func(c *SwitchSpec, v string) { c.Method = v })},
		{name: "switch-body", usage: "http: request body template with {mode}",
			apply: onSwitches(parseString, func(c *SwitchSpec, v string) { c.Body = v })},
		{name: "switch-header", usage: "http: request header NAME:VALUE, ${ENV} expanded when sent (repeatable)",
			apply: func(s *Spec, vals []string) error {
				h := map[string]string{}
				for _, v := range vals {
					k, val, ok := strings.Cut(v, ":")
					if k = strings.TrimSpace(k); !ok || k == "" {
						return fmt.Errorf("%q: want NAME:VALUE", k)
					}
					h[k] = strings.TrimSpace(val)
				}
				return onSwitches(func(string) (map[string]string, error) { return h, nil },
					func(c *SwitchSpec, v map[string]string) { c.Headers = v })(s, vals)
			}},
		{name: "switch-expect-status", usage: "http: statuses that mean success, comma-separated (default: any 2xx)",
			apply: onSwitches(parseInts, func(c *SwitchSpec, v []int) { c.ExpectStatus = v })},
		{name: "switch-current-url", usage: "http: URL whose GET answers the current mode",
			apply: onSwitches(parseString, func(c *SwitchSpec, v string) { c.CurrentURL = v })},
		{name: "switch-command", usage: "exec: command and arguments, split at spaces; {mode} replaced, else the mode is appended",
			apply: onSwitches(func(v string) ([]string, error) { return strings.Fields(v), nil },
				func(c *SwitchSpec, v []string) { c.Command = v })},
		{name: "switch-current-command", usage: "exec: command printing the current mode",
			apply: onSwitches(func(v string) ([]string, error) { return strings.Fields(v), nil },
				func(c *SwitchSpec, v []string) { c.CurrentCommand = v })},
		{name: "switch-restart-frontend", usage: "sim: restart the simulated frontend after switching", isBool: true,
			apply: onSwitches(parseBool, func(c *SwitchSpec, v bool) { c.RestartFrontend = v })},
		{name: "switch-restart-workers", usage: "sim: restart the simulated workers after switching", isBool: true,
			apply: onSwitches(parseBool, func(c *SwitchSpec, v bool) { c.RestartWorkers = v })},
		{name: "switch-timeout", usage: "bound on one switch (default 2m for exec, 30s for http and sim)",
			apply: onSwitches(parseDuration, func(c *SwitchSpec, v Duration) { c.Timeout = v })},
		{name: "switch-estimate", usage: "expected time of a switch plus readiness, for the plan's estimate", def: durDef(func(d *Spec) Duration { return d.SwitchEstimate }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.SwitchEstimate = v })},

		{name: "runs", usage: "repetitions of the levels x modes grid (mode order alternates)", def: func(d *Spec) string { return strconv.Itoa(d.Runs) },
			apply: last(parseInt, func(s *Spec, v int) { s.Runs = v })},
		{name: "warmup", usage: "warm-up at every level before measuring", def: durDef(func(d *Spec) Duration { return d.Warmup }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Warmup = v })},
		{name: "measure", usage: "measurement window of every level", def: durDef(func(d *Spec) Duration { return d.Measure }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Measure = v })},
		{name: "snapshots", usage: "equal parts of the measurement window reported separately", def: func(d *Spec) string { return strconv.Itoa(d.Snapshots) },
			apply: last(parseInt, func(s *Spec, v int) { s.Snapshots = v })},
		{name: "cooldown", usage: "idle pause after every level", def: durDef(func(d *Spec) Duration { return d.Cooldown }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Cooldown = v })},
		{name: "sla", usage: "TTFT target for the highest level that meets it", def: durDef(func(d *Spec) Duration { return d.SLA }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.SLA = v })},
		{name: "fallback-sla", usage: "looser TTFT target used when no level meets --sla", def: durDef(func(d *Spec) Duration { return d.FallbackSLA }),
			apply: last(parseDuration, func(s *Spec, v Duration) { s.FallbackSLA = v })},
		{name: "out", usage: "output directory",
			apply: last(parseString, func(s *Spec, v string) { s.Output = v })},
		{name: "agents", usage: "agents to wait for (0: run the load in-process)",
			apply: last(parseInt, func(s *Spec, v int) { s.Agents = v })},

		{name: "ready-skip", usage: "do not wait for readiness after a switch", isBool: true,
			apply: last(parseBool, func(s *Spec, v bool) { s.Readiness.Skip = v })},
		{name: "ready-health-timeout", usage: "readiness: bound on waiting for /health (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.HealthTimeout = v })},
		{name: "ready-models-timeout", usage: "readiness: bound on waiting for /v1/models to list the model (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.ModelsTimeout = v })},
		{name: "ready-completions-timeout", usage: "readiness: bound on waiting for stable completions (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.CompletionsTimeout = v })},
		{name: "ready-prime-timeout", usage: "readiness: bound on the priming conversations (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.PrimeTimeout = v })},
		{name: "ready-completions", usage: "readiness: completions in a row that must succeed with stable TTFT (0: default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Readiness.Completions = v })},
		{name: "ready-max-tokens", usage: "readiness: tokens per check completion, 1..8 (0: default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Readiness.MaxTokens = v })},
		{name: "ready-ttft-spread", usage: "readiness: max/min bound of those TTFTs (0: default)",
			apply: last(parseFloat, func(s *Spec, v float64) { s.Readiness.TTFTSpread = v })},
		{name: "ready-ttft-slack", usage: "readiness: max-min below which TTFTs count as stable anyway (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.TTFTSlack = v })},
		{name: "ready-prime", usage: "readiness: priming conversations (0: default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Readiness.Prime = v })},
		{name: "ready-prime-turns", usage: "readiness: turns per priming conversation (0: default)",
			apply: last(parseInt, func(s *Spec, v int) { s.Readiness.PrimeTurns = v })},
		{name: "ready-interval", usage: "readiness: first retry delay, doubled up to --ready-max-interval (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.Interval = v })},
		{name: "ready-max-interval", usage: "readiness: longest retry delay (0: default)",
			apply: last(parseDuration, func(s *Spec, v Duration) { s.Readiness.MaxInterval = v })},
	}
}

// RegisterFlags defines a flag on fs for every Spec field. The flags hold
// what the user typed until ApplyFlags writes them over a Spec, so the usual
// order is: RegisterFlags, fs.Parse, Load (or Default), ApplyFlags,
// Validate. Help texts show Default()'s values.
func RegisterFlags(fs *flag.FlagSet) {
	d := Default()
	for _, def := range flagDefs() {
		f := &specFlag{isBool: def.isBool, apply: def.apply}
		if def.def != nil {
			f.def = def.def(d)
		}
		if def.isBool {
			f.def = "false"
		}
		fs.Var(f, def.name, def.usage)
	}
}

// ApplyFlags writes the spec flags the user set on fs (fs.Visit sees only
// those) over s, so they override the file and unset flags leave it alone.
// Flags on fs that RegisterFlags did not define are ignored. Time-valued
// flags take Go durations ("90s"). It reports every bad value, joined.
func (s *Spec) ApplyFlags(fs *flag.FlagSet) error {
	var errs []error
	fs.Visit(func(fl *flag.Flag) {
		f, ok := fl.Value.(*specFlag)
		if !ok || len(f.vals) == 0 {
			return
		}
		if err := f.apply(s, f.vals); err != nil {
			errs = append(errs, fmt.Errorf("flag --%s: %w", fl.Name, err))
		}
	})
	return errors.Join(errs...)
}
