package ui

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// resultFiles are the files of a report directory the results view
// serves besides the page: the charts and the machine-readable outputs.
var resultFiles = map[string]string{
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
	".tsv":  "text/tab-separated-values; charset=utf-8",
	".md":   "text/markdown; charset=utf-8",
}

// ResultsHandler serves a finished sweep's report directory (what
// `fleetbench report` and `sweep` write) as a page in the dashboard's
// style: report.md's tables and text rendered to HTML, its charts inline,
// and the directory's charts, JSON, TSV and Markdown files as they are.
// report.md is read at each request, so a re-render shows at once.
// Nothing outside dir is served, and no other kind of file.
func ResultsHandler(dir string) (http.Handler, error) {
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return nil, fmt.Errorf("open dashboard style: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		src, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			http.Error(w, "read report.md: "+err.Error(), http.StatusInternalServerError)
			return
		}
		var body bytes.Buffer
		if err := md.Convert(src, &body); err != nil {
			http.Error(w, "render report.md: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'")
		fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetbench results: %s</title><style>%s
main img { max-width: 100%%; border:1px solid var(--line); border-radius:6px; }
main table { margin: .5rem 0 1rem; }</style></head>
<body><header><h1>fleetbench <span>results</span></h1><span class="muted">%s</span></header><main class="scroll">%s</main></body></html>`,
			html.EscapeString(filepath.Base(dir)), css, html.EscapeString(dir), body.Bytes())
	})
	mux.HandleFunc("GET /{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		ctype, ok := resultFiles[strings.ToLower(path.Ext(name))]
		if !ok || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		_, _ = w.Write(b)
	})
	return mux, nil
}
