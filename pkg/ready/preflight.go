package ready

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
)

// DefaultPreflightTimeout bounds the whole preflight: a target that cannot
// answer one small request in this time is not ready to be measured.
const DefaultPreflightTimeout = 30 * time.Second

// ErrPreflight is wrapped by every error Preflight returns for a target that
// is not fit to load, as opposed to a cancelled context.
var ErrPreflight = errors.New("preflight")

// ErrModelNotServed is wrapped, with ErrPreflight, by the error of Preflight
// and Probe for a target whose /v1/models lists models but not the one
// asked for.
var ErrModelNotServed = errors.New("model not served")

// notServedError says which model was asked for and which are served.
type notServedError struct {
	model, where string
	ids          []string
}

func (e *notServedError) Error() string {
	return fmt.Sprintf("model %q is not served by %s; it serves: %s", e.model, e.where, orNone(e.ids))
}

func (e *notServedError) Unwrap() error { return ErrModelNotServed }

// notServed is the one-line error, the same from Preflight and Probe, for
// a model that /v1/models (listing ids) does not serve.
func notServed(model, where string, ids []string) error {
	return fmt.Errorf("%w: %w", ErrPreflight, &notServedError{model: model, where: where, ids: ids})
}

// Preflight checks the target once, before any load, and says in one line
// what is wrong with it:
//   - it is reachable (the dial error otherwise);
//   - /v1/models, when the server has that endpoint, lists cc.Model (else
//     the models it does serve are named);
//   - the credentials are accepted (401/403 name the key's variable);
//   - one tiny streamed completion returns content.
//
// It sends at most one GET and one completion of two tokens. timeout 0 is
// DefaultPreflightTimeout. It is safe to call from any goroutine.
func Preflight(ctx context.Context, cc client.Config, timeout time.Duration, logger hclog.Logger) error {
	if timeout <= 0 {
		timeout = DefaultPreflightTimeout
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	where := client.RedactURL(cc.BaseURL)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrPreflight, fmt.Sprintf(format, args...))
	}
	t, err := newTarget(cc)
	if err != nil {
		return err
	}
	defer t.hc.CloseIdleConnections()
	status, body, err := t.get(ctx, "/v1/models")
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ctx.Err()
	case err != nil:
		return fail("cannot reach %s: %v", where, err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fail("%s refused the credentials (HTTP %d: %s); %s", where, status, clean(body), keyHint(cc.APIKeyEnv))
	case status == http.StatusOK:
		ids, err := t.models(ctx)
		if err != nil {
			return fail("%s: %v", where, err)
		}
		if !slices.Contains(ids, cc.Model) {
			return notServed(cc.Model, where, ids)
		}
	default:
		// No /v1/models (404, or a proxy that does not route it): the
		// completion below tells whether the model is served.
		logger.Debug("preflight: no usable /v1/models; checking with a completion", "status", status)
	}
	cc.MaxTokens = 2
	cl, err := client.New(cc, logger)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	defer cl.Close()
	req := &client.Request{Prompt: "fleetbench preflight: reply with one word.", MaxTokens: 2}
	if cc.Endpoint != client.EndpointCompletions {
		req.Messages = []openai.Message{
			{Role: openai.RoleSystem, Content: "You are checked by fleetbench before a benchmark."},
			{Role: openai.RoleUser, Content: req.Prompt},
		}
		req.Prompt = ""
	}
	res := cl.Stream(ctx, req)
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ctx.Err()
	case res.Status == http.StatusUnauthorized || res.Status == http.StatusForbidden:
		return fail("%s refused the credentials (HTTP %d: %s); %s", where, res.Status, orEmptyBody(res.ServerMessage), keyHint(cc.APIKeyEnv))
	case !res.OK():
		return fail("a test completion to %s failed (%s): %v", where, res.Class, res.Err)
	case res.TTFT <= 0:
		return fail("a test completion to %s streamed no content (finish reason %q)", where, res.FinishReason)
	}
	logger.Debug("preflight passed", "target", where, "model", cc.Model, "ttft", res.TTFT)
	return nil
}

// orEmptyBody is a server's message, or says there was none.
func orEmptyBody(msg string) string {
	if msg == "" {
		return "(empty body)"
	}
	return msg
}

// keyHint says which variable holds the key, for a refused credential.
func keyHint(env string) string {
	if env == "" {
		return "no API key was sent: name its environment variable with --api-key-env"
	}
	return fmt.Sprintf("the API key is read from $%s (--api-key-env): check it is set and valid", env)
}

// KeyRequired reports whether the target refuses a request without the
// API key that cc names: with the key set, it lists /v1/models once
// without it; a 401 or 403 says the key is required. It is false when no
// key is set (the preflight passed without one), when the server has no
// /v1/models, or when the request fails. It is safe to call from any
// goroutine.
func KeyRequired(ctx context.Context, cc client.Config) bool {
	if cc.APIKeyEnv == "" || os.Getenv(cc.APIKeyEnv) == "" {
		return false
	}
	cc.APIKeyEnv = ""
	t, err := newTarget(cc)
	if err != nil {
		return false
	}
	defer t.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, _, err := t.get(ctx, "/v1/models")
	return err == nil && (status == http.StatusUnauthorized || status == http.StatusForbidden)
}

// WaitReachable waits up to d for the target to answer HTTP at all: a
// refused or failed connection, or a 502/503/504 from a proxy in front of
// it, is taken for a server still starting (a model server applied with
// the benchmark, say) and retried every second; any other answer ends the
// wait. It logs what it waits for every 10 s and returns the last error
// when d passes. d <= 0 returns nil at once.
func WaitReachable(ctx context.Context, cc client.Config, d time.Duration, logger hclog.Logger) error {
	if d <= 0 {
		return nil
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	t, err := newTarget(cc)
	if err != nil {
		return err
	}
	defer t.hc.CloseIdleConnections()
	where := client.RedactURL(cc.BaseURL)
	deadline := time.Now().Add(d)
	var lastLog time.Time
	for {
		status, _, err := t.get(ctx, "/v1/models")
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
			why = fmt.Sprintf("HTTP %d", status)
		default:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: cannot reach %s after waiting %s: %s", ErrPreflight, where, d, why)
		}
		if time.Since(lastLog) >= 10*time.Second {
			logger.Info("waiting for the target to accept requests", "target", where, "reason", why, "up_to", time.Until(deadline).Round(time.Second))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
