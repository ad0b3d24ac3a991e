package servermetrics

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryName keeps docs/server-metrics.md in step with the
// catalogue: every name read is documented.
func TestDocsListEveryName(t *testing.T) {
	b, err := os.ReadFile("../../docs/server-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, n := range CatalogNames() {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, "`"+n+"{") && !strings.Contains(doc, "`"+n+" (") {
			t.Errorf("docs/server-metrics.md does not list %s", n)
		}
	}
}
