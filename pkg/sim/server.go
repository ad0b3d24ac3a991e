package sim

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

const maxBodyBytes = 32 << 20

func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handleChat)
	mux.HandleFunc("/v1/completions", s.handleCompletion)
	mux.HandleFunc("/v1/models", s.handleModels)
	mux.HandleFunc("/health", s.handleHealth)
	mux.HandleFunc("/health/ready", s.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("/admin/router", s.handleAdminRouter)
	mux.HandleFunc("POST /admin/restart/frontend", s.handleRestartFrontend)
	mux.HandleFunc("POST /admin/restart/workers", s.handleRestartWorkers)
	mux.HandleFunc("GET /admin/state", s.handleState)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, httpError(http.StatusNotFound))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleModels lists the model once workers have registered it. While
// workers load, Dynamo's frontend has no model registered and answers with
// an empty list (vLLM itself does not listen until it is ready); the model
// then appears before the workers can serve — the gap the probe command
// measures.
func (s *Sim) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeAPIError(w, httpError(http.StatusMethodNotAllowed))
		return
	}
	list := openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{}}
	if s.phase(time.Now()) != phaseLoading {
		list.Data = append(list.Data, openai.Model{
			ID:          s.cfg.Model,
			Object:      openai.ObjectModel,
			Created:     s.created,
			OwnedBy:     "fleetbench-sim",
			MaxModelLen: s.cfg.Engine.MaxModelLen,
		})
	}
	writeJSON(w, http.StatusOK, list)
}

// handleHealth is liveness: the frontend process answers.
func (s *Sim) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

// handleReady is readiness: 200 only when workers can serve.
func (s *Sim) handleReady(w http.ResponseWriter, _ *http.Request) {
	if s.phase(time.Now()) != phaseReady {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "notready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
