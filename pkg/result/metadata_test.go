package result

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestLabelMetadataBackend: result.json carries vLLM's label, the
// metadata pairs as top-level keys after num_prompts, and the backend of
// the endpoint driven.
func TestLabelMetadataBackend(t *testing.T) {
	w := record.NewWindow(1, hdr.Default)
	start := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		endpoint, backend string
	}{{"", "openai-chat"}, {"chat", "openai-chat"}, {"completions", "openai"}} {
		l := Load{Model: "m", Label: "kv-run", Backend: BackendFor(tt.endpoint), Metadata: map[string]string{"gpu": "h100", "tp": "2"}}
		sum, err := New(w, l.Facts(start, start.Add(time.Minute), time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "r.json")
		if err := WriteJSONFile(path, sum); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got["backend"] != tt.backend || got["endpoint_type"] != tt.backend || got["label"] != "kv-run" ||
			got["gpu"] != "h100" || got["tp"] != "2" {
			t.Errorf("endpoint %q: backend %v endpoint_type %v label %v gpu %v tp %v", tt.endpoint,
				got["backend"], got["endpoint_type"], got["label"], got["gpu"], got["tp"])
		}
		s := string(b)
		if i, j := strings.Index(s, `"num_prompts"`), strings.Index(s, `"gpu"`); i < 0 || j < i || j > strings.Index(s, `"request_rate"`) {
			t.Errorf("metadata not between num_prompts and request_rate:\n%s", s)
		}
	}
}

func TestCheckMetadata(t *testing.T) {
	if err := CheckMetadata(map[string]string{"gpu": "h100", "run": "3"}); err != nil {
		t.Errorf("plain keys: %v", err)
	}
	for _, bad := range []string{"completed", "p99_ttft_ms", "kv_hit_rate", " "} {
		if err := CheckMetadata(map[string]string{bad: "x"}); !errors.Is(err, ErrMetadataKey) {
			t.Errorf("key %q: error %v, want ErrMetadataKey", bad, err)
		}
	}
}
