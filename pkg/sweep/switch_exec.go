package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Exec switch limits.
const (
	// DefaultExecTimeout bounds one exec switch when SwitchSpec.Timeout is
	// unset: long enough for a kubectl rollout, short enough to notice a
	// hang.
	DefaultExecTimeout = 2 * time.Minute
	// execWaitDelay is how long to wait for the output pipes to close after
	// the process was killed or exited, since a child it left behind may
	// hold them open.
	execWaitDelay = 5 * time.Second
	// outputKeep is how much of each output stream is kept (the tail).
	outputKeep = 64 << 10
	// errTail is how much of stderr goes into an error.
	errTail = 1 << 10
)

// ModeEnv is the environment variable holding the mode for exec switches.
const ModeEnv = "FLEETBENCH_MODE"

// execSwitch runs a command to switch modes.
type execSwitch struct {
	command []string
	current []string
	timeout time.Duration
	log     hclog.Logger
}

var (
	_ Switcher   = (*execSwitch)(nil)
	_ ModeReader = (*execSwitch)(nil)
)

func newExecSwitch(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
	if err := cfg.OnlyFields("command", "current_command", "timeout"); err != nil {
		return nil, err
	}
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, errors.New("command is required, e.g. command: [./switch-router.sh]")
	}
	return &execSwitch{
		command: cfg.Command,
		current: cfg.CurrentCommand,
		timeout: cfg.timeoutOr(DefaultExecTimeout),
		log:     env.Logger.Named("switch").With("kind", KindExec),
	}, nil
}

// Switch runs the command with the mode as an argument and in
// FLEETBENCH_MODE. A non-zero exit, or running past the timeout, is an error
// that carries the tail of standard error.
func (e *execSwitch) Switch(ctx context.Context, mode string) error {
	args := make([]string, 0, len(e.command)+1)
	replaced := false
	for _, a := range e.command {
		if strings.Contains(a, "{mode}") {
			replaced = true
			a = strings.ReplaceAll(a, "{mode}", mode)
		}
		args = append(args, a)
	}
	if !replaced {
		args = append(args, mode)
	}
	start := time.Now()
	stdout, err := e.run(ctx, args, mode)
	if err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	e.log.Info("routing mode switched", "mode", mode, "elapsed", time.Since(start).Round(time.Millisecond))
	e.log.Debug("switch command output", "stdout", lastBytes(stdout, errTail))
	return nil
}

// Current runs the current command and returns its trimmed output.
func (e *execSwitch) Current(ctx context.Context) (string, error) {
	if len(e.current) == 0 {
		return "", ErrNoCurrent
	}
	out, err := e.run(ctx, e.current, "")
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	mode := strings.TrimSpace(string(out))
	if mode == "" {
		return "", errors.New("read current mode: command printed nothing")
	}
	return mode, nil
}

// run runs args within the timeout and returns the tail of its standard
// output.
func (e *execSwitch) run(parent context.Context, args []string, mode string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(parent, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	if mode != "" {
		cmd.Env = append(cmd.Env, ModeEnv+"="+mode)
	}
	cmd.WaitDelay = execWaitDelay
	killGroup(cmd)
	var stdout, stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	e.log.Debug("running switch command", "command", args[0], "args", len(args)-1)
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	tail := strings.TrimSpace(lastBytes(stderr.Bytes(), errTail))
	var exitErr *exec.ExitError
	switch {
	case parent.Err() != nil:
		err = fmt.Errorf("command %s: %w", args[0], parent.Err())
	case ctx.Err() != nil:
		err = fmt.Errorf("command %s timed out after %s: %w", args[0], e.timeout, ctx.Err())
	case errors.As(err, &exitErr):
		err = fmt.Errorf("command %s exited with status %d", args[0], exitErr.ExitCode())
	default:
		err = fmt.Errorf("run command %s: %w", args[0], err)
	}
	if tail != "" {
		err = fmt.Errorf("%w; stderr: %s", err, tail)
	}
	return nil, err
}

// tailBuffer keeps the last outputKeep bytes written to it. It is used by
// one exec at a time (os/exec copies each stream from one goroutine).
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.b = append(t.b, p...)
	if len(t.b) > outputKeep {
		t.b = append(t.b[:0], t.b[len(t.b)-outputKeep:]...)
	}
	return n, nil
}

func (t *tailBuffer) Bytes() []byte { return t.b }

// lastBytes returns the last n bytes of b as text, marked when cut.
func lastBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return "..." + strings.ToValidUTF8(string(b[len(b)-n:]), "")
}
