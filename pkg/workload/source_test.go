package workload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "w.jsonl")
	if err := os.WriteFile(jsonl, []byte(sampleJSONL), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     Config
		kind    string
		wantErr string
	}{
		{"default docchat", Config{Seed: 1}, "docchat", ""},
		{"docchat", Config{Kind: "docchat", Documents: 2, PromptTokens: 500}, "docchat", ""},
		{"sharegpt", Config{Kind: "sharegpt", Dataset: sampleShareGPT, MaxConversations: 2}, "sharegpt", ""},
		{"jsonl", Config{Kind: "jsonl", Dataset: jsonl, MaxTokens: 10}, "jsonl", ""},
		{"unknown kind", Config{Kind: "csv"}, "", "unknown workload kind"},
		{"sharegpt without path", Config{Kind: "sharegpt"}, "", "path is empty"},
		{"jsonl missing file", Config{Kind: "jsonl", Dataset: filepath.Join(dir, "nope")}, "", "no such file"},
		{"bad docchat", Config{Turns: Turns{Min: 4, Max: 1}}, "", "max turns"},
		{"user model without asker", Config{UserModel: &UserModelConfig{URL: "http://x", Model: "m"}}, "", "no asker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg, nil, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != tt.kind {
				t.Errorf("Name() = %q", s.Name())
			}
			if _, err := s.Conversation(3).Next(context.Background(), 0, nil); err != nil {
				t.Error(err)
			}
		})
	}
	s, err := New(Config{Kind: "jsonl", Dataset: jsonl, MaxTokens: 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn, _ := s.Conversation(2).Next(context.Background(), 0, nil); turn.MaxTokens != 10 {
		t.Errorf("jsonl turn without max_tokens: %d, want the configured 10", turn.MaxTokens)
	}
}

func ExampleNew() {
	think, _ := ParseThinkTime("exp:2s")
	src, err := New(Config{Kind: KindDocChat, Seed: 42, Documents: 3, Think: think}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	conv := src.Conversation(0)
	first, _ := conv.Next(context.Background(), 0, nil)
	fmt.Println(src.Name(), conv.Turns() >= DefaultMinTurns, strings.HasPrefix(first.User, "<document>\n# "))
	second, _ := conv.Next(context.Background(), 1, nil)
	fmt.Println(second.ThinkTime > 0, second.ThinkTime < time.Minute)
	// Output:
	// docchat true true
	// true true
}
