package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// DefaultHTTPTimeout bounds one http or sim switch request when
// SwitchSpec.Timeout is unset.
const DefaultHTTPTimeout = 30 * time.Second

// bodyKeep bounds what is read of a response body.
const bodyKeep = 64 << 10

// httpSwitch sends one request to switch modes.
type httpSwitch struct {
	method     string
	url        string
	body       string
	headers    map[string]string
	expect     []int
	currentURL string
	timeout    time.Duration
	hc         *http.Client
	log        hclog.Logger
}

var (
	_ Switcher   = (*httpSwitch)(nil)
	_ ModeReader = (*httpSwitch)(nil)
)

func newHTTPSwitch(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
	if err := cfg.OnlyFields("url", "method", "body", "headers", "expect_status", "current_url", "timeout"); err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, errors.New("url is required, e.g. url: http://router:8080/admin/mode/{mode}")
	}
	if err := checkURL(strings.ReplaceAll(cfg.URL, "{mode}", "m")); err != nil {
		return nil, err
	}
	if cfg.CurrentURL != "" {
		if err := checkURL(cfg.CurrentURL); err != nil {
			return nil, fmt.Errorf("current_url: %w", err)
		}
	}
	method := strings.ToUpper(cfg.Method)
	if method == "" {
		method = http.MethodPost
	}
	for _, st := range cfg.ExpectStatus {
		if st < 100 || st > 599 {
			return nil, fmt.Errorf("expect_status %d is not an HTTP status", st)
		}
	}
	for k := range cfg.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return nil, fmt.Errorf("header name %q is invalid", k)
		}
	}
	return &httpSwitch{
		method:     method,
		url:        cfg.URL,
		body:       cfg.Body,
		headers:    cfg.Headers,
		expect:     cfg.ExpectStatus,
		currentURL: cfg.CurrentURL,
		timeout:    cfg.timeoutOr(DefaultHTTPTimeout),
		hc:         newHTTPClient(),
		log:        env.Logger.Named("switch").With("kind", KindHTTP),
	}, nil
}

// Switch sends the request with {mode} replaced in the URL (path-escaped)
// and in the body, and checks the status.
func (h *httpSwitch) Switch(ctx context.Context, mode string) error {
	u := strings.ReplaceAll(h.url, "{mode}", url.PathEscape(mode))
	body := strings.ReplaceAll(h.body, "{mode}", mode)
	hdr := make(http.Header, len(h.headers)+1)
	for k, v := range h.headers {
		hdr.Set(k, expandBraced(v))
	}
	if body != "" && hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", contentType(body))
	}
	start := time.Now()
	status, respBody, err := do(ctx, h.hc, h.timeout, h.method, u, body, hdr)
	if err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	if !h.ok(status) {
		return fmt.Errorf("switch to mode %q: %s %s answered %d, want %s: %s",
			mode, h.method, client.RedactURL(u), status, h.want(), cleanText(respBody))
	}
	h.log.Info("routing mode switched", "mode", mode, "status", status, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// Current GETs current_url and reads the mode from a JSON object's "mode"
// field or from the text.
func (h *httpSwitch) Current(ctx context.Context) (string, error) {
	if h.currentURL == "" {
		return "", ErrNoCurrent
	}
	hdr := make(http.Header, len(h.headers))
	for k, v := range h.headers {
		hdr.Set(k, expandBraced(v))
	}
	status, body, err := do(ctx, h.hc, h.timeout, http.MethodGet, h.currentURL, "", hdr)
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	if status/100 != 2 {
		return "", fmt.Errorf("read current mode: GET %s answered %d: %s", client.RedactURL(h.currentURL), status, cleanText(body))
	}
	return modeFromBody(body)
}

func (h *httpSwitch) ok(status int) bool {
	if len(h.expect) == 0 {
		return status/100 == 2
	}
	return slices.Contains(h.expect, status)
}

func (h *httpSwitch) want() string {
	if len(h.expect) == 0 {
		return "2xx"
	}
	return strings.Trim(fmt.Sprint(h.expect), "[]")
}

// expandBraced replaces ${NAME} with the environment variable's value. A
// bare $NAME is left alone (unlike os.ExpandEnv), so a literal '$' in a
// token survives.
func expandBraced(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(os.Getenv(s[i+2 : i+j]))
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

// contentType guesses the body's type: JSON when it looks like JSON.
func contentType(body string) string {
	if t := strings.TrimSpace(body); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// modeFromBody reads a mode from {"mode": "..."} or from plain text.
func modeFromBody(body []byte) (string, error) {
	t := bytes.TrimSpace(body)
	if len(t) > 0 && (t[0] == '{' || t[0] == '"') {
		var v struct {
			Mode string `json:"mode"`
		}
		if t[0] == '"' {
			if err := json.Unmarshal(t, &v.Mode); err != nil {
				return "", fmt.Errorf("read current mode: %w", err)
			}
		} else if err := json.Unmarshal(t, &v); err != nil {
			return "", fmt.Errorf("read current mode: %w", err)
		}
		t = []byte(v.Mode)
	}
	if len(t) == 0 {
		return "", errors.New("read current mode: empty answer")
	}
	return string(t), nil
}

// newHTTPClient returns a client for admin requests: the environment's proxy
// settings apply (an admin API may sit behind one), redirects are not
// followed.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// do sends one request bounded by timeout and returns the status and a
// bounded prefix of the body.
func do(ctx context.Context, hc *http.Client, timeout time.Duration, method, u, body string, hdr http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		// url.Error prints the URL; it came from the spec, so it is not a
		// secret, but a query string might be.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, nil, fmt.Errorf("%s %s: %w", method, client.RedactURL(u), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, bodyKeep))
	if err != nil {
		return resp.StatusCode, b, fmt.Errorf("%s %s: read body: %w", method, client.RedactURL(u), err)
	}
	return resp.StatusCode, b, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q must be http:// or https:// with a host", client.RedactURL(s))
	}
	return nil
}

// cleanText makes server text fit one log line: bounded, no control
// characters.
func cleanText(b []byte) string {
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > errTail {
		s = strings.ToValidUTF8(s[:errTail], "") + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
