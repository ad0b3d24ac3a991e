package sweep

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/internal/flags"
)

func parseString(v string) (string, error) { return v, nil }
func parseBool(v string) (bool, error)     { return strconv.ParseBool(strings.TrimSpace(v)) }
func parseDuration(v string) (Duration, error) {
	var d Duration
	err := d.UnmarshalText([]byte(v))
	return d, err
}

// parseInts parses "200,204" (spaces allowed).
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
func onSwitches[T any](parse func(string) (T, error), set func(*SwitchSpec, T)) func(*Spec, string) error {
	return func(s *Spec, raw string) error {
		v, err := parse(raw)
		if err != nil {
			return err
		}
		if s.Switch == nil {
			s.Switch = &SwitchSpec{}
		}
		set(s.Switch, v)
		for i := range s.Modes {
			if s.Modes[i].Switch != nil {
				set(s.Modes[i].Switch, v)
			}
		}
		return nil
	}
}

// specValue is a flag whose Set edits a Spec in ways a plain field binding
// cannot (every mode's switch, the list of modes). It shows the last value
// given.
type specValue struct {
	s     *Spec
	typ   string
	shown string
	set   func(s *Spec, raw string) error
}

func (v *specValue) String() string { return v.shown }
func (v *specValue) Type() string   { return v.typ }
func (v *specValue) Set(raw string) error {
	if err := v.set(v.s, raw); err != nil {
		return err
	}
	v.shown = raw
	return nil
}

// AddFlags registers a flag for every Spec setting on fs, bound to s: the
// shared target, workload and load flags (internal/flags, the same as `run`'s
// and `coordinator`'s), then the sweep's own. s's current values are the
// defaults shown, so bind a Default() spec. Concurrency levels are
// --concurrency and the measured time --duration, as in every command;
// --levels and --measure remain as deprecated aliases.
func AddFlags(fs *pflag.FlagSet, s *Spec) {
	flags.Target(fs, &s.Target, &s.Model, &s.Endpoint, &s.APIKeyEnv)
	flags.Preflight(fs, &s.SkipPreflight)
	flags.WorkerHeader(fs, &s.WorkerHeader)
	flags.FailFast(fs, (*time.Duration)(&s.FailFast))
	flags.Goodput(fs, &s.Goodput)
	flags.Thresholds(fs, &s.Thresholds, flags.ExitThresholds)
	flags.AbortOnFail(fs, &s.AbortOnFail)
	flags.Workload(fs, &s.Workload)
	flags.AddLoad(fs, flags.Load{
		Concurrency: &s.Levels, RequestRate: &s.RequestRate, Warmup: (*time.Duration)(&s.Warmup),
		Duration: (*time.Duration)(&s.Measure), Cooldown: (*time.Duration)(&s.Cooldown),
	})
	flags.Alias(fs, "levels", "concurrency")
	flags.Alias(fs, "measure", "duration")

	dur := func(d *Duration, name, usage string) { fs.DurationVar((*time.Duration)(d), name, d.D(), usage) }
	fs.Var(&specValue{s: s, typ: "NAME[,NAME...]", set: func(s *Spec, raw string) error {
		names, _ := parseList(raw)
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
		return nil
	}}, "modes", "routing modes, comma-separated, e.g. kv,round_robin (modes named in the file keep their switch)")
	fs.StringVar(&s.Baseline, "baseline", s.Baseline, "mode reports treat as the baseline (default: the first mode)")
	fs.StringVar(&s.Candidate, "candidate", s.Candidate, "mode reports compare with the baseline (default: the second mode)")
	fs.IntVar(&s.Runs, "runs", s.Runs, "repetitions of the levels x modes grid (mode order alternates)")
	fs.IntVar(&s.Snapshots, "snapshots", s.Snapshots, "equal parts of the measurement window reported separately")
	dur(&s.ModeWarmup, "mode-warmup", "before each mode's first level, run the highest level unmeasured for this long (0: none)")
	dur(&s.SLA, "sla", "TTFT p95 target: the highest level that meets it is the mode's breakpoint")
	dur(&s.FallbackSLA, "fallback-sla", "looser TTFT p95 target, evaluated when the breakpoints at --sla do not tell the modes apart: the baseline fails --sla at its lowest level, or both modes cross it at the same level")
	dur(&s.SwitchEstimate, "switch-estimate", "expected time of a switch plus readiness, for the plan's estimate")
	flags.Group(fs, flags.GroupSweep, "modes", "baseline", "candidate", "runs", "mode-warmup", "snapshots", "sla", "fallback-sla", "switch-estimate")
	fs.StringVar(&s.Output, "out", s.Output, "output directory")
	flags.Group(fs, flags.GroupOutput, "out")
	fs.IntVar(&s.Agents, "agents", s.Agents, "agents of the fleet (0: one, in this process); with --kube-agents the Job's size unless --agent-capacity sizes it")
	addSettingsFlags(fs, s)
	flags.Group(fs, flags.GroupFleet, "agents")

	sw := func(name, typ, usage string, set func(*Spec, string) error) {
		fs.Var(&specValue{s: s, typ: typ, set: set}, name, usage)
		flags.Group(fs, flags.GroupSwitch, name)
	}
	sw("switch", "KIND", "how modes are switched, for all modes: none, exec, http, sim or a registered kind",
		onSwitches(parseString, func(c *SwitchSpec, v string) { c.Kind = v }))
	sw("switch-url", "URL", "http: request URL template with {mode}; sim: simulator URL (default: target)",
		onSwitches(parseString, func(c *SwitchSpec, v string) { c.URL = v }))
	sw("switch-method", "METHOD", "http: request method (default POST)",
		onSwitches(parseString, func(c *SwitchSpec, v string) { c.Method = v }))
	sw("switch-body", "TEMPLATE", "http: request body template with {mode}",
		onSwitches(parseString, func(c *SwitchSpec, v string) { c.Body = v }))
	headers := map[string]string{}
	sw("switch-header", "NAME:VALUE", "http: request header, ${ENV} expanded when sent (repeatable)",
		func(s *Spec, raw string) error {
			k, val, ok := strings.Cut(raw, ":")
			if k = strings.TrimSpace(k); !ok || k == "" {
				return fmt.Errorf("%q: want NAME:VALUE", raw)
			}
			headers[k] = strings.TrimSpace(val)
			return onSwitches(func(string) (map[string]string, error) { return headers, nil },
				func(c *SwitchSpec, v map[string]string) { c.Headers = v })(s, raw)
		})
	options := map[string]string{}
	sw("switch-option", "KEY=VALUE", "setting of a registered switch kind (dynamo, kubeai, patch), e.g. deployment=frontend (repeatable)",
		func(s *Spec, raw string) error {
			k, val, ok := strings.Cut(raw, "=")
			if k = strings.TrimSpace(k); !ok || k == "" {
				return fmt.Errorf("%q: want KEY=VALUE", raw)
			}
			options[k] = strings.TrimSpace(val)
			return onSwitches(func(string) (map[string]string, error) { return options, nil },
				func(c *SwitchSpec, v map[string]string) {
					if c.Options == nil {
						c.Options = map[string]string{}
					}
					for k, v := range v {
						c.Options[k] = v
					}
				})(s, raw)
		})
	sw("switch-expect-status", "CODE[,CODE...]", "http: statuses that mean success, comma-separated (default: any 2xx)",
		onSwitches(parseInts, func(c *SwitchSpec, v []int) { c.ExpectStatus = v }))
	sw("switch-current-url", "URL", "http: URL whose GET answers the current mode",
		onSwitches(parseString, func(c *SwitchSpec, v string) { c.CurrentURL = v }))
	sw("switch-command", "COMMAND", "exec: command and arguments, split at spaces; {mode} replaced, else the mode is appended",
		onSwitches(func(v string) ([]string, error) { return strings.Fields(v), nil },
			func(c *SwitchSpec, v []string) { c.Command = v }))
	sw("switch-current-command", "COMMAND", "exec: command printing the current mode",
		onSwitches(func(v string) ([]string, error) { return strings.Fields(v), nil },
			func(c *SwitchSpec, v []string) { c.CurrentCommand = v }))
	sw("switch-restart-frontend", "BOOL", "sim: restart the simulated frontend after switching",
		onSwitches(parseBool, func(c *SwitchSpec, v bool) { c.RestartFrontend = v }))
	fs.Lookup("switch-restart-frontend").NoOptDefVal = "true"
	sw("switch-restart-workers", "BOOL", "sim: restart the simulated workers after switching",
		onSwitches(parseBool, func(c *SwitchSpec, v bool) { c.RestartWorkers = v }))
	fs.Lookup("switch-restart-workers").NoOptDefVal = "true"
	sw("switch-timeout", "DURATION", "bound on one switch (default 2m for exec, 30s for http and sim)",
		onSwitches(parseDuration, func(c *SwitchSpec, v Duration) { c.Timeout = v }))

	r := &s.Readiness
	fs.BoolVar(&r.Skip, "ready-skip", r.Skip, "do not wait for readiness after a switch")
	dur(&r.HealthTimeout, "ready-health-timeout", "readiness: bound on waiting for /health (0: default)")
	dur(&r.ModelsTimeout, "ready-models-timeout", "readiness: bound on waiting for /v1/models to list the model (0: default)")
	dur(&r.CompletionsTimeout, "ready-completions-timeout", "readiness: bound on waiting for stable completions (0: default)")
	dur(&r.PrimeTimeout, "ready-prime-timeout", "readiness: bound on the priming conversations (0: default)")
	fs.IntVar(&r.Completions, "ready-completions", r.Completions, "readiness: completions in a row that must succeed with stable TTFT (0: default)")
	fs.IntVar(&r.MaxTokens, "ready-max-tokens", r.MaxTokens, "readiness: tokens per check completion, 1..8 (0: default)")
	fs.Float64Var(&r.TTFTSpread, "ready-ttft-spread", r.TTFTSpread, "readiness: max/min bound of those TTFTs (0: default)")
	dur(&r.TTFTSlack, "ready-ttft-slack", "readiness: max-min below which TTFTs count as stable anyway (0: default)")
	fs.IntVar(&r.Prime, "ready-prime", r.Prime, "readiness: priming conversations (0: default)")
	fs.IntVar(&r.PrimeTurns, "ready-prime-turns", r.PrimeTurns, "readiness: turns per priming conversation (0: default)")
	dur(&r.Interval, "ready-interval", "readiness: first retry delay, doubled up to --ready-max-interval (0: default)")
	dur(&r.MaxInterval, "ready-max-interval", "readiness: longest retry delay (0: default)")
	flags.Group(fs, flags.GroupReadiness, "ready-skip", "ready-health-timeout", "ready-models-timeout",
		"ready-completions-timeout", "ready-prime-timeout", "ready-completions", "ready-max-tokens", "ready-ttft-spread",
		"ready-ttft-slack", "ready-prime", "ready-prime-turns", "ready-interval", "ready-max-interval")
}

// RegisterFlags registers the spec flags on fs bound to a Default() spec
// and records what the user types, for ApplyFlags. The usual order:
// RegisterFlags, parse, Load (or Default), ApplyFlags, Validate.
func RegisterFlags(fs *pflag.FlagSet) {
	AddFlags(fs, Default())
	flags.Record(fs)
}

// ApplyFlags writes the spec flags the user typed on fs (registered with
// RegisterFlags) over s, so they override the file and flags not typed
// leave it alone. Flags on fs that are not spec flags are ignored.
func (s *Spec) ApplyFlags(fs *pflag.FlagSet) error {
	on := pflag.NewFlagSet("spec", pflag.ContinueOnError)
	AddFlags(on, s)
	return flags.Replay(fs, on)
}
