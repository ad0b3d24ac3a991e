package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// ErrCannotRun is wrapped by Run's error when the agent stopped after
// telling the coordinator it cannot run (a fatal Problem).
var ErrCannotRun = errors.New("agent cannot run")

// Problem is what an agent tells the coordinator, at once, when it cannot
// run its share (Fatal) or runs with a warning.
type Problem struct {
	// Step is StepJoin, StepBuild or StepRun.
	Step string
	// Stage and Epoch are the assignment's, for StepBuild and StepRun.
	Stage int
	Epoch uint64
	// Class is one of the Class constants.
	Class string
	// Message is the error, with this agent's secrets redacted.
	Message string
	Fatal   bool
}

// Steps of a Problem.
const (
	StepJoin  = "join"  // the environment check against the welcome's spec
	StepBuild = "build" // building a stage's engine
	StepRun   = "run"   // a running engine
)

// Classes of a Problem.
const (
	ClassConfig      = "config"      // the spec cannot work (bad workload, bad target URL)
	ClassCredential  = "credential"  // the key variable the target needs is unset
	ClassDataset     = "dataset"     // a dataset or documents path is missing or unreadable
	ClassUnreachable = "unreachable" // the target cannot be reached from this agent
	ClassEngine      = "engine"      // the load engine could not be built or failed
)

// ClassError tags an error with a Problem class; a Builder returns one to
// say which class its failure is.
type ClassError struct {
	Class string
	Err   error
}

func (e *ClassError) Error() string { return e.Err.Error() }
func (e *ClassError) Unwrap() error { return e.Err }

// classOf returns the Problem class of a build or run error.
func classOf(err error) string {
	var ce *ClassError
	switch {
	case errors.As(err, &ce):
		return ce.Class
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return ClassDataset
	}
	return ClassEngine
}

// redact removes the values of the spec's key variables from msg: an
// error may quote what a server echoed back.
func redact(msg string, spec Spec, keyEnv string) string {
	for _, env := range []string{keyEnv, spec.APIKeyEnv, userModelKeyEnv(spec)} {
		if v := os.Getenv(env); env != "" && len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

func userModelKeyEnv(spec Spec) string {
	if um := spec.Workload.UserModel; um != nil {
		return um.APIKeyEnv
	}
	return ""
}

// DefaultCheckDialTimeout bounds EnvChecker's dial of the target.
const DefaultCheckDialTimeout = 3 * time.Second

// EnvChecker returns the Checker of a real agent: it checks, without
// sending a request, that this process has what the spec needs.
//   - The key variable (apiKeyEnv, or the spec's when ""): unset is fatal
//     when the coordinator found that the target requires a key, a warning
//     otherwise.
//   - The workload is valid, and its dataset or documents path exists here.
//   - The user model's key variable, if it names one (a warning: follow-ups
//     fall back to canned questions).
//   - The target's host and port accept a TCP connection from here.
func EnvChecker(apiKeyEnv string) Checker {
	return func(ctx context.Context, spec Spec) []Problem {
		var out []Problem
		add := func(fatal bool, class, format string, args ...any) {
			out = append(out, Problem{Step: StepJoin, Class: class, Fatal: fatal,
				Message: redact(fmt.Sprintf(format, args...), spec, apiKeyEnv)})
		}
		keyEnv := apiKeyEnv
		if keyEnv == "" {
			keyEnv = spec.APIKeyEnv
		}
		if keyEnv != "" && os.Getenv(keyEnv) == "" {
			if spec.KeyRequired {
				add(true, ClassCredential, "environment variable %s is not set on this agent, and the target requires an API key", keyEnv)
			} else {
				add(false, ClassCredential, "environment variable %s is not set on this agent: requests go without an API key", keyEnv)
			}
		}
		if err := spec.Workload.Validate(); err != nil {
			add(true, ClassConfig, "workload: %v", err)
		} else if p := spec.Workload.Dataset; p != "" {
			if _, err := os.Stat(p); err != nil {
				add(true, ClassDataset, "%s dataset: %v", orDocChat(spec.Workload.Kind), err)
			}
		}
		if env := userModelKeyEnv(spec); env != "" && os.Getenv(env) == "" {
			add(false, ClassCredential, "environment variable %s (the user model's key) is not set on this agent", env)
		}
		cc := client.Config{BaseURL: spec.Target, Model: spec.Model, Endpoint: spec.Endpoint}
		if err := cc.Validate(); err != nil {
			add(true, ClassConfig, "%v", err)
			return out
		}
		if err := dialTarget(ctx, spec.Target, DefaultCheckDialTimeout); err != nil {
			add(true, ClassUnreachable, "cannot reach %s from this agent: %v", client.RedactURL(spec.Target), err)
		}
		return out
	}
}

func orDocChat(kind string) string {
	if kind == "" {
		return workload.KindDocChat
	}
	return kind
}

// dialTarget opens and closes one TCP connection to the target's host and
// port (80 or 443 by scheme when the URL has none).
func dialTarget(ctx context.Context, target string, timeout time.Duration) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			return oe.Err
		}
		return err
	}
	return conn.Close()
}
