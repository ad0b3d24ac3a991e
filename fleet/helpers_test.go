package fleet

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

const testAPIKey = testserve.APIKey

// sseServer is testserve.SSE.
func sseServer(t *testing.T, requests *atomic.Int64) *httptest.Server {
	return testserve.SSE(t, requests)
}

func readResult(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatalf("read result.json: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("parse result.json: %v\n%s", err, b)
	}
	return m
}
