package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/internal/cpu"
	"github.com/fleetbench/fleetbench/pkg/report"
)

// Defaults of a Server.
const (
	// DefaultInterval is how often the feed sends a snapshot.
	DefaultInterval = time.Second
	// DefaultMaxConcurrency is the highest level the slider may ask for
	// unless Config.Max says otherwise.
	DefaultMaxConcurrency = 100_000
	// Path is where the page is served.
	Path = "/ui"
)

//go:embed assets
var assets embed.FS

// Controller changes the running level's sessions: a coordinator's
// SetConcurrency, or a single engine's through ControllerFunc.
type Controller interface {
	SetConcurrency(ctx context.Context, level int) error
}

// ControllerFunc adapts a function to a Controller.
type ControllerFunc func(ctx context.Context, level int) error

// SetConcurrency calls f.
func (f ControllerFunc) SetConcurrency(ctx context.Context, level int) error { return f(ctx, level) }

// Config configures a Server.
type Config struct {
	// Command names the command serving the page (run, coordinator,
	// sweep).
	Command string
	// Feed is the live view; required.
	Feed *Feed
	// Control changes the level; nil makes the slider read-only, with
	// ReadOnly as the reason shown.
	Control  Controller
	ReadOnly string
	// Max is the highest level accepted (0: DefaultMaxConcurrency).
	Max int
	// Token is the fleet token a request from beyond loopback must carry
	// to change anything ("" refuses every such change). Never logged.
	Token string
	// Interval is the feed's (0: DefaultInterval).
	Interval time.Duration
	// Logger may be nil.
	Logger hclog.Logger
}

// Server serves the page, the feed and the controls. Its handlers may run
// concurrently; Close ends every feed stream.
type Server struct {
	cfg    Config
	logger hclog.Logger
	mux    *http.ServeMux
	done   chan struct{}
	close  sync.Once
	cpu    cpu.Meter

	mu              sync.Mutex
	baseline        []byte // the baseline loaded, re-encoded; nil: none
	baselineName    string
	baselineVersion int
	cached          []byte
	cachedAt        time.Time
}

// New returns a server of cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Feed == nil {
		return nil, errors.New("new dashboard: a feed is required")
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMaxConcurrency
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Control == nil && cfg.ReadOnly == "" {
		cfg.ReadOnly = "this command cannot change its level"
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, logger: logger.Named("ui"), mux: http.NewServeMux(), done: make(chan struct{})}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("open dashboard assets: %w", err)
	}
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	s.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		serveAsset(w, r, static, "index.html")
	})
	s.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /ui/events", s.events)
	s.mux.HandleFunc("GET /ui/snapshot", s.snapshot)
	s.mux.HandleFunc("POST /ui/concurrency", s.setConcurrency)
	s.mux.HandleFunc("GET /ui/baseline", s.getBaseline)
	s.mux.HandleFunc("POST /ui/baseline", s.postBaseline)
	return s, nil
}

// ServeHTTP serves /ui and everything under it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
	s.mux.ServeHTTP(w, r)
}

// Close ends every feed stream and makes new ones end at once; it is
// idempotent. Call it before shutting the HTTP server down: a stream never
// goes idle on its own.
func (s *Server) Close() { s.close.Do(func() { close(s.done) }) }

func serveAsset(w http.ResponseWriter, r *http.Request, fsys fs.FS, name string) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		http.Error(w, "asset missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
	_ = r
}

// LoadBaselineFile loads a baseline.json from path (--ui-baseline). Its
// error says what is wrong in one line; nothing changes then.
func (s *Server) LoadBaselineFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read baseline: %w", err)
	}
	return s.SetBaseline(filepath.Base(path), b)
}

// SetBaseline loads the baseline.json b under name; a malformed one is
// refused with ParseBaseline's error and changes nothing.
func (s *Server) SetBaseline(name string, b []byte) error {
	bl, err := report.ParseBaseline(b)
	if err != nil {
		return err
	}
	enc, err := json.Marshal(bl)
	if err != nil {
		return fmt.Errorf("encode baseline: %w", err)
	}
	s.mu.Lock()
	s.baseline, s.baselineName = enc, name
	s.baselineVersion++
	s.cached = nil
	s.mu.Unlock()
	return nil
}

// snapshotJSON is the feed's snapshot at now, shared by every stream for
// half an interval so many viewers cost one computation.
func (s *Server) snapshotJSON(now time.Time) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && now.Sub(s.cachedAt) < s.cfg.Interval/2 {
		return s.cached, nil
	}
	snap := s.cfg.Feed.Snapshot(now)
	snap.Command = s.cfg.Command
	snap.Control = Control{Enabled: s.cfg.Control != nil, Reason: s.cfg.ReadOnly, Max: s.cfg.Max}
	if s.cfg.Control != nil {
		snap.Control.Reason = ""
	}
	if snap.Sweep != nil {
		snap.Control = Control{Reason: "read-only during a sweep: the sweep sets each level", Max: s.cfg.Max}
	}
	snap.Baseline, snap.BaselineVersion = s.baselineName, s.baselineVersion
	if cores, ok := s.cpu.Sample(now); ok {
		snap.ProcessCPU = &cores
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	s.cached, s.cachedAt = b, now
	return b, nil
}

// events streams a snapshot every interval as server-sent events until
// the client goes or Close is called.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	send := func() bool {
		b, err := s.snapshotJSON(time.Now())
		if err != nil {
			s.logger.Error("encode snapshot", "error", err)
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !send() {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-t.C:
			if !send() {
				return
			}
		}
	}
}

// snapshot answers one snapshot (for scripts and tests).
func (s *Server) snapshot(w http.ResponseWriter, _ *http.Request) {
	b, err := s.snapshotJSON(time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// maxBody bounds a control request's body.
const maxBody = 16 << 10

// setConcurrency changes the live level: {"level": N}.
func (s *Server) setConcurrency(w http.ResponseWriter, r *http.Request) {
	if code, err := s.authorize(r); err != nil {
		writeError(w, code, err)
		return
	}
	var req struct {
		Level *int `json:"level"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&req); err != nil || req.Level == nil {
		writeError(w, http.StatusBadRequest, errors.New(`want a JSON body {"level": N}`))
		return
	}
	level := *req.Level
	switch {
	case s.cfg.Feed.sweeping():
		writeError(w, http.StatusConflict, errors.New("read-only during a sweep: the sweep sets each level"))
		return
	case s.cfg.Control == nil:
		writeError(w, http.StatusConflict, errors.New(s.cfg.ReadOnly))
		return
	case level <= 0 || level > s.cfg.Max:
		writeError(w, http.StatusBadRequest, fmt.Errorf("concurrency %d is out of range: want 1 to %d", level, s.cfg.Max))
		return
	}
	if err := s.cfg.Control.SetConcurrency(r.Context(), level); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	s.logger.Info("concurrency changed from the dashboard", "level", level, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"level": level})
}

// getBaseline answers the baseline loaded: {"name": ..., "baseline": {...}}
// or {"name": ""}.
func (s *Server) getBaseline(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	name, b, v := s.baselineName, s.baseline, s.baselineVersion
	s.mu.Unlock()
	out := struct {
		Name     string          `json:"name"`
		Version  int             `json:"version"`
		Baseline json.RawMessage `json:"baseline,omitempty"`
	}{Name: name, Version: v, Baseline: b}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// postBaseline loads the baseline.json in the body (?name= names it).
func (s *Server) postBaseline(w http.ResponseWriter, r *http.Request) {
	if code, err := s.authorize(r); err != nil {
		writeError(w, code, err)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, report.MaxBaselineSize+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read baseline: %w", err))
		return
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "baseline.json"
	}
	name = filepath.Base(strings.Join(strings.Fields(name), " "))
	if len(name) > 120 {
		name = name[:120]
	}
	if err := s.SetBaseline(name, b); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	s.logger.Info("baseline loaded from the dashboard", "name", name, "remote", r.RemoteAddr)
	s.getBaseline(w, r)
}

// authorize applies the rule for changes: JSON only and from the page's
// own origin (a page elsewhere cannot post to it), and from beyond
// loopback only with the fleet token as a bearer token, compared in
// constant time.
func (s *Server) authorize(r *http.Request) (int, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return http.StatusUnsupportedMediaType, errors.New("want Content-Type application/json")
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return http.StatusForbidden, errors.New("refused: a request from another site's page")
		}
	}
	if loopback(r.RemoteAddr) {
		return 0, nil
	}
	if s.cfg.Token == "" {
		return http.StatusForbidden, errors.New("changes from beyond loopback need the fleet token, and this process has none (--token-file or $FLEETBENCH_TOKEN)")
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.cfg.Token)) != 1 {
		return http.StatusUnauthorized, errors.New("changes from beyond loopback need the fleet token: enter it in the page")
	}
	return 0, nil
}

// loopback reports whether a request's remote address is a loopback one.
func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
