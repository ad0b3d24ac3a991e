package main

// The scripted server the root package's whole-run benchmarks run
// against, in a child process of its own.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// scriptedEnv makes the test binary serve the scripted server of
// serveScripted instead of running tests.
const scriptedEnv = "FLEETBENCH_TEST_SCRIPTED"

// The scripted server's answer: the first token 100 ms after the request
// is read, then scriptedTokens-1 more 50 ms apart (as pkg/load's
// benchmarks script it), on a schedule from the request's arrival.
const (
	scriptedFirst  = 100 * time.Millisecond
	scriptedGap    = 50 * time.Millisecond
	scriptedTokens = 20
)

// serveScripted is the scripted server's main: it listens on loopback,
// prints its address and serves chat completions until stdin closes.
func serveScripted() int {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0") //nolint:contextcheck // a process's main
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"scripted","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range scriptedTokens {
			time.Sleep(time.Until(start.Add(scriptedFirst + time.Duration(i)*scriptedGap)))
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},\"finish_reason\":null}]}\n\n", i); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
			n/4, scriptedTokens, n/4+scriptedTokens)
		_ = rc.Flush()
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// startScripted starts the scripted server in a child process and returns
// its base URL; the child ends with the benchmark.
func startScripted(b *testing.B) string {
	b.Helper()
	cmd := niced(b.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), scriptedEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("read scripted server address: %v", err)
	}
	return "http://" + strings.TrimSpace(line)
}

// niced returns a command that runs name at nice -10 through nice(1),
// when there is one, so that other work on a shared machine (builds,
// tests) starves the measured processes less; without the privilege
// nice(1) warns and runs it at the usual priority (liveRun.nice says
// which). Both variants run alike.
func niced(ctx context.Context, name string, args ...string) *exec.Cmd {
	nice, err := exec.LookPath("nice")
	if err != nil {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, nice, append([]string{"-n", "-10", name}, args...)...)
}
