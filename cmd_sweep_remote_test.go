package main

import (
	"context"
	"encoding/json"
	"fmt"
	"google.golang.org/protobuf/encoding/prototext"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/internal/testutil/testcert"
	"github.com/fleetbench/fleetbench/internal/wire"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// TestSweepWithRemoteAgents runs a sweep whose fleet is two external
// agents (`fleetbench agent`, here in goroutines): they join once, stay
// connected across levels and the mode switch, and leave when the sweep
// ends.
func TestSweepWithRemoteAgents(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testSweepWithRemoteAgents(t, false) })
	t.Run("tls", func(t *testing.T) { testSweepWithRemoteAgents(t, true) })
}

func testSweepWithRemoteAgents(t *testing.T, tls bool) {
	t.Setenv(tokenEnv, "sweep-remote-token")
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	dir := t.TempDir()
	var sweepTLS, agentTLS []string
	if tls {
		caFile, certFile, keyFile := testcert.NewCA(t, "sweep test CA").ServerFiles(t, dir)
		sweepTLS = []string{"--tls-cert", certFile, "--tls-key", keyFile}
		agentTLS = []string{"--tls-ca", caFile}
	}
	out := filepath.Join(dir, "out")
	spec := writeSweepFile(t, dir, strings.ReplaceAll(resumeSweep, "SWITCHLOG", filepath.Join(dir, "switches.log")))
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	codes, errs := make([]int, 2), make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			args := append([]string{"--log-level", "error", "agent", "--coordinator", addr,
				"--id", fmt.Sprintf("remote-%d", i), "--api-key-env", "FLEETBENCH_TEST_KEY"}, agentTLS...)
			codes[i], _, errs[i] = runCommand(ctx, args...)
		})
	}
	code, stdout, stderr := runCommand(ctx, append([]string{"sweep", "-f", spec, "--out", out, "--listen", addr, "--remote-agents", "2"}, sweepTLS...)...)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("sweep exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for i, c := range codes {
		if c != exitOK {
			t.Errorf("agent %d exit %d: %s", i, c, errs[i])
		}
	}
	header, rows := sweepTSV(t, out)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (2 levels x 2 modes):\n%v", len(rows), rows)
	}
	col := slices.Index(header, "requests")
	for i, r := range rows {
		if col < 0 || r[col] == "0" {
			t.Errorf("row %d: no requests (column %d of %v): %v", i, col, header, r)
		}
	}
}

// TestRemoteAgentRunsTheSameConversations checks that an agent building
// its workload from the coordinator's spec (specBuilder) gets the very
// conversations a local engine gets from the sweep's workload config.
func TestRemoteAgentRunsTheSameConversations(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	wcfg := workload.Config{
		Kind: workload.KindDocChat, Seed: 42, MaxTokens: 24, Documents: 3, PromptTokens: 700, Turns: workload.Turns{Min: 2, Max: 5}, SessionHeader: "X-Session",
		Think: workload.ThinkTime{Kind: workload.ThinkExp, Mean: 1500 * time.Millisecond},
	}
	local, err := workload.New(wcfg, hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The workload travels as the agents receive it: through the wire.
	wired := wire.WorkloadToProto(wcfg)
	tgt, err := agent.ClientBuilder(hclog.NewNullLogger(), agent.ClientOptions{APIKeyEnv: "FLEETBENCH_TEST_KEY"})(t.Context(), agent.Spec{
		Target: "http://target.test", Model: "m", Workload: wire.WorkloadFromProto(wired),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tgt.Close(); err != nil {
			t.Error(err)
		}
	}()
	if tgt.Source.Name() != local.Name() {
		t.Errorf("remote workload %q, local %q", tgt.Source.Name(), local.Name())
	}
	turns := 0
	for i := range 20 {
		lc, rc := local.Conversation(i), tgt.Source.Conversation(i)
		if lc.Turns() != rc.Turns() || lc.System() != rc.System() {
			t.Fatalf("conversation %d: remote %d turns, local %d (or the system prompts differ)", i, rc.Turns(), lc.Turns())
		}
		var history []openai.Message
		for k := range lc.Turns() {
			lt, err1 := lc.Next(t.Context(), k, history)
			rt, err2 := rc.Next(t.Context(), k, history)
			if err1 != nil || err2 != nil {
				t.Fatalf("conversation %d turn %d: %v %v", i, k, err1, err2)
			}
			if lt != rt {
				t.Fatalf("conversation %d turn %d: remote %+v, local %+v", i, k, rt, lt)
			}
			history = append(history, openai.Message{Role: "user", Content: lt.User}, openai.Message{Role: "assistant", Content: "ok"})
			turns++
		}
	}
	if turns < 40 {
		t.Errorf("only %d turns compared", turns)
	}
	// The spec carries every setting the workload is built from.
	back := wire.WorkloadFromProto(wired)
	if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", wcfg) {
		t.Errorf("workload config round trip:\n got %+v\nwant %+v", back, wcfg)
	}
}

// TestRemoteAgentAsksTheUserModel checks that a docchat user model travels
// in the coordinator's spec: a remote agent's follow-up questions come from
// the user model, which it reaches with the key from its own environment.
func TestRemoteAgentAsksTheUserModel(t *testing.T) {
	const question = "Which of the open risks has no owner yet?"
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	t.Setenv("FLEETBENCH_TEST_USER_KEY", "user-model-key-1234")
	var calls, unauthorized atomic.Int64
	um := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer user-model-key-1234" {
			unauthorized.Add(1)
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{
			{Delta: &openai.Delta{Content: question}, FinishReason: new(openai.FinishStop)}}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	}))
	defer um.Close()
	wcfg := workload.Config{Kind: workload.KindDocChat, Seed: 3, MaxTokens: 24, Documents: 2, PromptTokens: 500, Turns: workload.Turns{Min: 3, Max: 3},
		UserModel: &workload.UserModelConfig{URL: um.URL, Model: "user-sim", APIKeyEnv: "FLEETBENCH_TEST_USER_KEY"}}
	wired := wire.WorkloadToProto(wcfg)
	if strings.Contains(prototext.Format(wired), "user-model-key-1234") {
		t.Fatalf("the spec carries the user model's key: %v", wired)
	}
	tgt, err := agent.ClientBuilder(hclog.NewNullLogger(), agent.ClientOptions{APIKeyEnv: "FLEETBENCH_TEST_KEY"})(t.Context(), agent.Spec{
		Target: "http://target.test", Model: "m", Workload: wire.WorkloadFromProto(wired),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tgt.Close(); err != nil {
			t.Error(err)
		}
	}()
	conv := tgt.Source.Conversation(0)
	history := []openai.Message{{Role: openai.RoleSystem, Content: conv.System()}}
	for k := range conv.Turns() {
		turn, err := conv.Next(t.Context(), k, history)
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && (turn.Fallback || turn.User != question) {
			t.Errorf("turn %d: %q (fallback %t), want the user model's question", k, turn.User, turn.Fallback)
		}
		history = append(history, openai.Message{Role: openai.RoleUser, Content: turn.User},
			openai.Message{Role: openai.RoleAssistant, Content: "An answer."})
	}
	if calls.Load() != 2 || unauthorized.Load() != 0 {
		t.Errorf("user model asked %d times (%d without the key), want 2 follow-ups", calls.Load(), unauthorized.Load())
	}
}
