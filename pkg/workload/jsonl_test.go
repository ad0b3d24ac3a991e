package workload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sampleJSONL = `{"id":"c1","system":"You are terse.","turns":[{"user":"Hi"},{"user":"And then?","max_tokens":128,"think_ms":500}]}

{"turns":[{"user":"Only turn","max_tokens":0}]}
{"id":"c3","turns":[{"user":"One"},{"user":"Two"}]}
`

func TestJSONL(t *testing.T) {
	s, err := ParseJSONL(strings.NewReader(sampleJSONL), 1, ThinkTime{Kind: ThinkFixed, Mean: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.maxTokens = 64
	if s.Len() != 3 || s.Name() != "jsonl" {
		t.Fatalf("%d conversations", s.Len())
	}
	c := s.Conversation(0)
	if c.System() != "You are terse." || c.Turns() != 2 || c.(*jsonlConv).ID() != "c1" {
		t.Fatalf("c1: %q %d", c.System(), c.Turns())
	}
	ctx := context.Background()
	t0, _ := c.Next(ctx, 0, nil)
	t1, _ := c.Next(ctx, 1, nil)
	if t0 != (Turn{User: "Hi", MaxTokens: 64}) {
		t.Errorf("turn 0: %+v", t0)
	}
	if t1 != (Turn{User: "And then?", MaxTokens: 128, ThinkTime: 500 * time.Millisecond}) {
		t.Errorf("turn 1: %+v", t1)
	}
	// An explicit max_tokens of 0 means the server's default, not the run's.
	if turn, _ := s.Conversation(1).Next(ctx, 0, nil); turn.MaxTokens != 0 {
		t.Errorf("explicit max_tokens 0: %d", turn.MaxTokens)
	}
	c3 := s.Conversation(5) // wraps to c3
	if c3.(*jsonlConv).ID() != "c3" || c3.Index() != 5 {
		t.Fatal("index 5 does not wrap to c3")
	}
	if turn, _ := c3.Next(ctx, 1, nil); turn.ThinkTime != time.Second || turn.User != "Two" {
		t.Errorf("c3 turn 1 uses the run's think time: %+v", turn)
	}
}

func TestJSONLErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty file", "\n\n", "no conversations"},
		{"syntax", `{"turns":[{"user":"a"}]}` + "\n" + `{"turns":[{"user":"b"}`, "line 2: truncated JSON object"},
		{"bad character", "\n\n" + `{"turns":[{"user":"a"}]]`, "line 3: column 24: invalid character ']'"},
		{"not json", `hello`, "line 1: column 1: invalid character 'h'"},
		{"unknown field", `{"turns":[{"usr":"a"}]}`, `line 1: json: unknown field "usr"`},
		{"wrong type", `{"turns":[{"user":"a","max_tokens":"10"}]}`, `line 1: column 39: field "turns.max_tokens": want int`},
		{"no turns", `{"id":"x"}`, `line 1: "turns" is missing or empty`},
		{"empty user", `{"turns":[{"user":"a"},{"user":""}]}`, `line 1: turns[1]: "user" is missing or empty`},
		{"negative max", `{"turns":[{"user":"a","max_tokens":-1}]}`, `turns[0]: "max_tokens" is negative`},
		{"negative think", `{"turns":[{"user":"a"},{"user":"b","think_ms":-5}]}`, `turns[1]: "think_ms" is negative`},
		{"think on first", `{"turns":[{"user":"a","think_ms":5}]}`, `turns[0]: "think_ms" is not allowed on the first turn`},
		{"duplicate id", `{"id":"a","turns":[{"user":"a"}]}` + "\n" + `{"id":"a","turns":[{"user":"b"}]}`, `line 2: id "a" already used on line 1`},
		{"two values", `{"turns":[{"user":"a"}]} {"turns":[{"user":"b"}]}`, "line 1: column 25: trailing data"},
		{"array", `[1,2]`, "line 1: column"},
		{"huge think", `{"turns":[{"user":"a"},{"user":"b","think_ms":99999999999}]}`, "longer than a day"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSONL(strings.NewReader(tt.in), 0, ThinkTime{})
			if !errors.Is(err, ErrJSONL) {
				t.Fatalf("err = %v, want ErrJSONL", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	if err := os.WriteFile(path, []byte("{\"turns\":[{\"user\":\"a\"}]}\r\n{\"turns\":[]}\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadJSONL(path, 0, ThinkTime{})
	if err == nil || !strings.Contains(err.Error(), path+": invalid jsonl workload: line 2") {
		t.Errorf("err = %v", err)
	}
	if _, err := LoadJSONL(filepath.Join(t.TempDir(), "missing"), 0, ThinkTime{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestJSONLLongLine(t *testing.T) {
	long := strings.Repeat("word ", 100000) // 500 KB, over bufio's buffer
	in := `{"turns":[{"user":"` + long + `"}]}` + "\n"
	s, err := ParseJSONL(strings.NewReader(in), 0, ThinkTime{})
	if err != nil {
		t.Fatal(err)
	}
	if turn, _ := s.Conversation(0).Next(context.Background(), 0, nil); turn.User != long {
		t.Error("long line mangled")
	}
}

func FuzzJSONL(f *testing.F) {
	f.Add([]byte(sampleJSONL))
	f.Add([]byte(`{"turns":[{"user":"a","max_tokens":1,"think_ms":0}]}`))
	f.Add([]byte("{\"id\":\"a\",\"turns\":[{\"user\":\"x\"}]}\n{\"id\":\"a\"}\n"))
	f.Add([]byte(`{"turns":[{"user":"a"},{"user":"b","think_ms":1e3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseJSONL(bytes.NewReader(data), 1, ThinkTime{Kind: ThinkExp, Mean: time.Second})
		if err != nil {
			if !errors.Is(err, ErrJSONL) {
				t.Fatalf("error does not wrap ErrJSONL: %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "line ") && !strings.Contains(msg, "no conversations") {
				t.Fatalf("error names no line: %v", err)
			}
			return
		}
		for i := range s.Len() {
			c := s.Conversation(i)
			for k := range c.Turns() {
				turn, err := c.Next(context.Background(), k, nil)
				if err != nil || turn.User == "" || turn.MaxTokens < 0 || turn.ThinkTime < 0 || (k == 0 && turn.ThinkTime != 0) {
					t.Fatalf("conversation %d turn %d: %+v, %v", i, k, turn, err)
				}
			}
		}
	})
}
