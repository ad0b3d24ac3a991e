package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResultsHandler(t *testing.T) {
	dir := t.TempDir()
	report := "# Sweep report\n\n| mode | level | TTFT p95 (ms) |\n| --- | --- | --- |\n| kv | 20 | 330 |\n\n![TTFT p95](ttft_p95.svg)\n"
	for name, body := range map[string]string{
		"report.md": report, "ttft_p95.svg": `<svg xmlns="http://www.w3.org/2000/svg"></svg>`,
		"baseline.json": `{}`, "secret.txt": "no",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ResultsHandler(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(p string) (int, string, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	code, ctype, page := get("/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("GET /: %d %s", code, ctype)
	}
	for _, want := range []string{"<table>", "<td>330</td>", `<img src="ttft_p95.svg"`, "--line"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if code, ctype, _ := get("/ttft_p95.svg"); code != 200 || ctype != "image/svg+xml" {
		t.Errorf("GET the chart: %d %s", code, ctype)
	}
	for _, p := range []string{"/secret.txt", "/..%2f..%2fetc%2fpasswd", "/missing.svg", "/.hidden.json"} {
		if code, _, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	if _, err := ResultsHandler(t.TempDir()); err == nil {
		t.Error("a directory without report.md was accepted")
	}
}
