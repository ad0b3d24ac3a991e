package sweep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Switcher changes the serving stack's routing mode. Switch returns once the
// change has been made (a command exited, an API answered); it does not wait
// for the stack to be ready again, which is ready.Gate's job. Implementations
// are safe for concurrent use, though a sweep switches one mode at a time.
type Switcher interface {
	Switch(ctx context.Context, mode string) error
}

// ModeReader is implemented by switchers that can read the current mode, so
// a sweep can put the stack back as it found it. Current returns
// ErrNoCurrent when this switcher was not configured to read it.
type ModeReader interface {
	Current(ctx context.Context) (string, error)
}

// SwitcherFunc adapts a function to Switcher.
type SwitcherFunc func(ctx context.Context, mode string) error

// Switch calls f.
func (f SwitcherFunc) Switch(ctx context.Context, mode string) error { return f(ctx, mode) }

var _ Switcher = SwitcherFunc(nil)

// ErrNoCurrent means a switcher cannot read the current routing mode.
var ErrNoCurrent = errors.New("switch cannot read the current mode")

// Current reads sw's current mode, or returns ErrNoCurrent when sw cannot.
func Current(ctx context.Context, sw Switcher) (string, error) {
	r, ok := sw.(ModeReader)
	if !ok {
		return "", ErrNoCurrent
	}
	return r.Current(ctx)
}

// Switch kinds built in.
const (
	KindNone = "none"
	KindExec = "exec"
	KindHTTP = "http"
	KindSim  = "sim"
)

// SwitchSpec configures one mode switch. Kind picks the implementation;
// the other fields apply to some kinds only, and setting one that does not
// apply is an error. Kinds registered by other packages (e.g. kubernetes)
// take their settings from Options.
type SwitchSpec struct {
	// Kind is none, exec, http, sim, or a registered kind.
	Kind string `json:"kind"`

	// URL is, for http, the request URL template ({mode} is replaced); for
	// sim, the simulator's base URL (default: the sweep's target).
	URL string `json:"url,omitempty"`
	// Method is the http request method (default POST).
	Method string `json:"method,omitempty"`
	// Body is the http request body template ({mode} is replaced).
	Body string `json:"body,omitempty"`
	// Headers are http request headers. Values are expanded with
	// ${NAME} from the environment when sent, so secrets stay out of the
	// file; they are never logged.
	Headers map[string]string `json:"headers,omitempty"`
	// ExpectStatus lists the http statuses that mean success (default: any
	// 2xx).
	ExpectStatus []int `json:"expect_status,omitempty"`
	// CurrentURL is, for http, a URL whose GET answers the current mode,
	// as text or as a JSON object with a "mode" field.
	CurrentURL string `json:"current_url,omitempty"`

	// Command is, for exec, the program and its arguments. {mode} in an
	// argument is replaced by the mode; with no {mode} the mode is added as
	// the last argument. FLEETBENCH_MODE holds it too.
	Command []string `json:"command,omitempty"`
	// CurrentCommand is, for exec, a command whose trimmed standard output
	// is the current mode.
	CurrentCommand []string `json:"current_command,omitempty"`

	// RestartFrontend and RestartWorkers make the sim switch restart the
	// simulated frontend (routing state lost) or workers (caches flushed,
	// startup phases again) after setting the mode.
	RestartFrontend bool `json:"restart_frontend,omitempty"`
	RestartWorkers  bool `json:"restart_workers,omitempty"`

	// Timeout bounds one switch (default 2m for exec, 30s for http and
	// sim; for sim with restart_workers it bounds the restart request).
	Timeout Duration `json:"timeout,omitempty"`

	// Options are the settings of registered kinds; built-in kinds accept
	// none.
	Options map[string]string `json:"options,omitempty"`
}

// SwitchEnv is what a Factory gets besides the SwitchSpec.
type SwitchEnv struct {
	// Target is the sweep's target URL.
	Target string
	// Logger is the parent logger; nil discards.
	Logger hclog.Logger
}

// Factory builds a Switcher from its configuration. It must only check and
// store the configuration, without I/O: Spec.Validate calls it to report
// mistakes before a sweep starts.
type Factory func(cfg SwitchSpec, env SwitchEnv) (Switcher, error)

var registry = struct {
	sync.RWMutex
	m map[string]Factory
}{m: map[string]Factory{}}

// Register makes a switch kind available by name. It panics when kind is
// empty, already registered, or f is nil, like database/sql.Register; call
// it from an init function. It is safe for concurrent use.
func Register(kind string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if kind == "" || f == nil {
		panic("sweep: Register with an empty kind or nil factory")
	}
	if _, dup := registry.m[kind]; dup {
		panic("sweep: Register called twice for switch kind " + kind)
	}
	registry.m[kind] = f
}

// Kinds returns the registered switch kinds, sorted.
func Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Sorted(maps.Keys(registry.m))
}

// NewSwitcher builds the switch cfg describes with the registered factory of
// its kind.
func NewSwitcher(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
	registry.RLock()
	f, ok := registry.m[cfg.Kind]
	registry.RUnlock()
	if !ok {
		if cfg.Kind == "" {
			return nil, fmt.Errorf("switch kind is empty (want one of %s)", strings.Join(Kinds(), ", "))
		}
		return nil, fmt.Errorf("unknown switch kind %q (want one of %s)", cfg.Kind, strings.Join(Kinds(), ", "))
	}
	if env.Logger == nil {
		env.Logger = hclog.NewNullLogger()
	}
	sw, err := f(cfg, env)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", cfg.Kind, err)
	}
	return sw, nil
}

// Switchers builds the switch of every mode, keyed by mode name.
func (s *Spec) Switchers(logger hclog.Logger) (map[string]Switcher, error) {
	out := make(map[string]Switcher, len(s.Modes))
	for _, m := range s.Modes {
		cfg := s.SwitchOf(m.Name)
		if cfg == nil {
			return nil, fmt.Errorf("mode %q has no switch", m.Name)
		}
		sw, err := NewSwitcher(*cfg, SwitchEnv{Target: s.Target, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("mode %q: %w", m.Name, err)
		}
		out[m.Name] = sw
	}
	return out, nil
}

func init() {
	Register(KindNone, newNoneSwitch)
	Register(KindExec, newExecSwitch)
	Register(KindHTTP, newHTTPSwitch)
	Register(KindSim, newSimSwitch)
}

// FieldError reports a SwitchSpec field that is set but that the switch
// kind does not read. It is immutable and safe to share.
type FieldError struct {
	// Field is the field's JSON name; Kind the switch kind.
	Field, Kind string
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("field %s does not apply to switch kind %q", e.Field, e.Kind)
}

// OnlyFields returns a *FieldError naming the first field of c that is set
// but not among allowed (JSON names), so a setting that would be ignored is
// reported instead, and an error for a negative timeout. Switch factories
// of every package call it; "options" must be allowed explicitly.
func (c SwitchSpec) OnlyFields(allowed ...string) error {
	set := []struct {
		name string
		on   bool
	}{
		{"url", c.URL != ""},
		{"method", c.Method != ""},
		{"body", c.Body != ""},
		{"headers", len(c.Headers) > 0},
		{"expect_status", len(c.ExpectStatus) > 0},
		{"current_url", c.CurrentURL != ""},
		{"command", len(c.Command) > 0},
		{"current_command", len(c.CurrentCommand) > 0},
		{"restart_frontend", c.RestartFrontend},
		{"restart_workers", c.RestartWorkers},
		{"timeout", c.Timeout != 0},
		{"options", len(c.Options) > 0},
	}
	for _, f := range set {
		if f.on && !slices.Contains(allowed, f.name) {
			return &FieldError{Field: f.name, Kind: c.Kind}
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("timeout %s must not be negative", c.Timeout)
	}
	return nil
}

// timeoutOr returns c's timeout, or def when unset.
func (c SwitchSpec) timeoutOr(def time.Duration) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout.D()
	}
	return def
}

// noneSwitch is a mode set by hand: it only says which mode is expected.
type noneSwitch struct{ log hclog.Logger }

func newNoneSwitch(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
	if err := cfg.OnlyFields(); err != nil {
		return nil, err
	}
	return &noneSwitch{log: env.Logger.Named("switch")}, nil
}

// Switch logs the mode the stack is expected to be in and returns.
func (n *noneSwitch) Switch(_ context.Context, mode string) error {
	n.log.Info("routing mode is set by hand, not switched", "mode", mode)
	return nil
}
