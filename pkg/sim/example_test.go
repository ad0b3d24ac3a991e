package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// Start an in-process simulator of a built-in hardware profile on a
// loopback port, send it an OpenAI chat completion, and stop it.
func Example() {
	cfg, err := sim.ProfileConfig(sim.DefaultProfile)
	if err != nil {
		log.Fatal(err)
	}
	cfg.TimeScale = 100 // run 100 times faster than the modelled hardware
	cfg.Router = sim.ModeRoundRobin
	s, err := sim.New(cfg, nil, nil) // no logger, no extra Prometheus registry
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() {
		cancel() // Serve drains in-flight requests, then returns nil
		if err := <-served; err != nil {
			log.Fatal(err)
		}
	}()

	body := `{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8, "ignore_eos": true}`
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get(sim.WorkerHeader))
	fmt.Println(out.Choices[0].FinishReason, out.Usage.CompletionTokens)
	// Output:
	// 200 worker-0
	// length 8
}

// Switch the routing mode at runtime, from Go or over the admin API; both
// accept the spellings of Dynamo and kubeai. Requests already routed are
// unaffected.
func ExampleSim_SetMode() {
	cfg, err := sim.ProfileConfig(sim.DefaultProfile)
	if err != nil {
		log.Fatal(err)
	}
	s, err := sim.New(cfg, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Mode())

	m, err := sim.ParseMode("PrefixHash")
	if err != nil {
		log.Fatal(err)
	}
	s.SetMode(m)
	fmt.Println(s.Mode())

	// The same over HTTP: PUT /admin/router with a mode name or
	// {"mode": "..."}. Handler serves it without a listener.
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/admin/router", strings.NewReader("round-robin")))
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()), s.Mode())
	// Output:
	// kv
	// prefix-hash
	// 200 {"mode":"round_robin"} round_robin
}
