package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

type modeBody struct {
	Mode Mode `json:"mode"`
}

func (s *Sim) handleAdminRouter(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, modeBody{Mode: s.Mode()})
	case http.MethodPut, http.MethodPost:
		b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err != nil {
			writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeBadRequest, msg: "read body: " + err.Error()})
			return
		}
		name := strings.TrimSpace(string(b))
		var mb modeBody
		if strings.HasPrefix(name, "{") {
			if err := json.Unmarshal(b, &mb); err != nil {
				writeAPIError(w, decodeError(err))
				return
			}
			name = string(mb.Mode)
		}
		m, err := ParseMode(name)
		if err != nil {
			writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeBadRequest, param: "mode", msg: err.Error()})
			return
		}
		s.SetMode(m)
		writeJSON(w, http.StatusOK, modeBody{Mode: m})
	default:
		writeAPIError(w, httpError(http.StatusMethodNotAllowed))
	}
}

func (s *Sim) handleRestartFrontend(w http.ResponseWriter, _ *http.Request) {
	s.RestartFrontend()
	writeJSON(w, http.StatusOK, map[string]string{"status": "restarted"})
}

func (s *Sim) handleRestartWorkers(w http.ResponseWriter, r *http.Request) {
	if err := s.RestartWorkers(r.Context()); err != nil {
		writeAPIError(w, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, msg: "restart workers: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status":          "restarting",
		"startup_seconds": s.cfg.scaled(s.cfg.StartupTime).Seconds(),
	})
}

// State is the body of GET /admin/state.
type State struct {
	Mode          Mode     `json:"mode"`
	Ready         bool     `json:"ready"`
	Workers       []string `json:"workers"`
	InFlight      []int    `json:"in_flight"`
	IndexedBlocks int      `json:"indexed_blocks"`
}

func (s *Sim) handleState(w http.ResponseWriter, _ *http.Request) {
	st := State{
		Mode:          s.Mode(),
		Ready:         s.phase(time.Now()) == phaseReady,
		InFlight:      s.router.load(),
		IndexedBlocks: s.idx.size(),
	}
	for _, wk := range s.workers {
		st.Workers = append(st.Workers, wk.name)
	}
	writeJSON(w, http.StatusOK, st)
}
