package sweep

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// modeName is what a mode may be called: it becomes part of file names.
var modeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate reports every problem with s, joined, or nil. It builds each
// mode's switch (without I/O) to check its settings.
func (s *Spec) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if err := client.CheckWorkerHeader(s.WorkerHeader); err != nil {
		add("%v", err)
	}
	slo, err := result.ParseSLO(s.Goodput)
	if err != nil {
		add("%v", err)
	}
	for _, raw := range s.Thresholds {
		th, err := result.ParseThreshold(raw)
		switch {
		case err != nil:
			add("threshold: %v", err)
		case th.Metric == "goodput" && slo.IsZero():
			add("threshold %q: goodput needs goodput SLOs (--goodput)", raw)
		}
	}
	if s.FailFast < 0 {
		add("fail_fast %s: must be >= 0", s.FailFast.D())
	}
	if s.Fleet.MetricsListen != "" {
		if err := flags.CheckListen(s.Fleet.MetricsListen); err != nil {
			add("metrics_listen (--metrics-listen) %v", err)
		}
	}
	if s.Target == "" {
		add("target is required (the server's base URL)")
	} else if u, err := url.Parse(s.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may carry a password or a key in its query: show it redacted.
		add("target %q must be an http:// or https:// URL with a host", client.RedactURL(s.Target))
	} else if u.User != nil {
		// The spec is written to the output directory and the reports:
		// a password in the URL would end up there.
		add("target %q must not carry user info: give the credential through api_key_env", client.RedactURL(s.Target))
	}
	if s.Model == "" {
		add("model is required")
	}
	switch s.Endpoint {
	case "", client.EndpointChat, client.EndpointCompletions:
	default:
		add("endpoint %q must be %q or %q", s.Endpoint, client.EndpointChat, client.EndpointCompletions)
	}
	if _, err := s.WorkloadConfig(); err != nil {
		add("workload: %w", err)
	}

	if len(s.Levels) == 0 {
		add("levels are required, e.g. levels: [20, 40, 80]")
	}
	seenLevel := map[int]bool{}
	for _, l := range s.Levels {
		if l < 1 {
			add("level %d must be at least 1", l)
		}
		if seenLevel[l] {
			add("level %d is listed twice", l)
		}
		seenLevel[l] = true
	}
	if s.RequestRate < 0 {
		add("request_rate %g must not be negative", s.RequestRate)
	}

	if len(s.Modes) == 0 {
		add("modes are required, e.g. modes: [{name: kv}, {name: round_robin}] with a switch")
	}
	seenMode := map[string]bool{}
	for i, m := range s.Modes {
		if !modeName.MatchString(m.Name) {
			add("mode %d: name %q must be letters, digits, '.', '_' or '-'", i+1, m.Name)
			continue
		}
		if seenMode[m.Name] {
			add("mode %q is listed twice", m.Name)
		}
		seenMode[m.Name] = true
		sw := s.SwitchOf(m.Name)
		if sw == nil {
			add("mode %q has no switch: set switch.kind (one of %s) for it or for all modes", m.Name, strings.Join(Kinds(), ", "))
			continue
		}
		if _, err := NewSwitcher(*sw, SwitchEnv{Target: s.Target}); err != nil {
			add("mode %q: %w", m.Name, err)
		}
	}
	baseline, candidate := s.Compared()
	if s.Baseline != "" && !seenMode[s.Baseline] {
		add("baseline %q is not one of the modes", s.Baseline)
	}
	if s.Candidate != "" && !seenMode[s.Candidate] {
		add("candidate %q is not one of the modes", s.Candidate)
	}
	if baseline != "" && baseline == candidate {
		add("baseline and candidate are both %q", baseline)
	}

	if s.Runs < 1 {
		add("runs %d must be at least 1", s.Runs)
	}
	if s.Warmup < 0 {
		add("warmup %s must not be negative", s.Warmup)
	}
	if s.ModeWarmup < 0 {
		add("mode_warmup %s must not be negative", s.ModeWarmup)
	}
	if s.ModeWarmup > 0 && s.RequestRate > 0 {
		add("mode_warmup runs the highest level of a closed loop; it does not go with request_rate")
	}
	if s.Measure <= 0 {
		add("measure %s must be positive", s.Measure)
	}
	if s.Snapshots < 1 {
		add("snapshots %d must be at least 1", s.Snapshots)
	} else if s.Measure > 0 && s.Measure.D()/time.Duration(s.Snapshots) < time.Second {
		add("measure %s cut into %d snapshots gives less than 1s each", s.Measure, s.Snapshots)
	}
	if s.Cooldown < 0 {
		add("cooldown %s must not be negative", s.Cooldown)
	}
	if s.SLA <= 0 {
		add("sla %s must be positive", s.SLA)
	}
	if s.FallbackSLA < s.SLA {
		add("fallback_sla %s must not be below sla %s", s.FallbackSLA, s.SLA)
	}
	if s.SwitchEstimate < 0 {
		add("switch_estimate %s must not be negative", s.SwitchEstimate)
	}
	if s.Output == "" {
		add("output directory is required")
	}
	if s.Agents < 0 {
		add("agents %d must not be negative", s.Agents)
	}
	errs = append(errs, s.validateFleet(s.KubeAgents())...)
	errs = append(errs, s.validateScrape()...)
	if !s.Readiness.Skip {
		rc := s.ReadyConfig()
		// The target, model and endpoint were checked above; check only
		// the readiness settings here.
		rc.Client = client.Config{BaseURL: "http://checked.invalid", Model: "checked"}
		if err := rc.Validate(); err != nil {
			add("readiness: %w", err)
		}
	}
	return errors.Join(errs...)
}
