package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"report.md":            "# report\n",
		"sweep.tsv":            "level\tmode\n20\tkv\n",
		"kv/run-1/result.json": `{"ttft_p95_ms": 12.5}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestServeAndExtract(t *testing.T) {
	src := writeTree(t)
	s := NewServer(src)
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before Finish: status %d, want 503", resp.StatusCode)
	}

	resp, err = http.Get(srv.URL + "?partial=1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(Header) != "running" {
		t.Fatalf("partial: status %d, state %q; want 200, running", resp.StatusCode, resp.Header.Get(Header))
	}
	resp.Body.Close()

	s.Finish("ok")
	resp, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(Header) != "done" {
		t.Fatalf("after Finish: status %d, state %q; want 200, done", resp.StatusCode, resp.Header.Get(Header))
	}
	dst := filepath.Join(t.TempDir(), "out")
	n, err := Extract(resp.Body, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("extracted %d files, want 3", n)
	}
	got, err := os.ReadFile(filepath.Join(dst, "kv/run-1/result.json"))
	if err != nil || string(got) != `{"ttft_p95_ms": 12.5}` {
		t.Errorf("result.json = %q, %v", got, err)
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  tar.Header
	}{
		{"parent", tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		{"absolute", tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		{"symlink", tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			if err := tw.WriteHeader(&tc.hdr); err != nil {
				t.Fatal(err)
			}
			if tc.hdr.Size > 0 {
				_, _ = tw.Write([]byte("x"))
			}
			_ = tw.Close()
			_ = zw.Close()
			parent := t.TempDir()
			_, err := Extract(&buf, filepath.Join(parent, "out"))
			if err == nil {
				t.Fatal("Extract accepted the entry")
			}
			if _, serr := os.Stat(filepath.Join(parent, "evil")); serr == nil {
				t.Error("a file was written outside the output directory")
			}
		})
	}
}

func TestExtractFailsOnTruncatedStream(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, writeTree(t)); err != nil {
		t.Fatal(err)
	}
	cut := buf.Bytes()[:buf.Len()-6] // the gzip trailer's CRC and size
	_, err := Extract(bytes.NewReader(cut), filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "read bundle") {
		t.Fatalf("Extract of a truncated bundle = %v, want a read error", err)
	}
}
