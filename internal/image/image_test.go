package image

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testConfig is a build of two fake platform binaries and a fake bundle.
func testConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Config{
		Binaries: []Binary{
			{Platform: "linux/amd64", Path: write("amd64", "\x7fELF amd64 fleetbench")},
			{Platform: "linux/arm64", Path: write("arm64", "\x7fELF arm64 fleetbench")},
		},
		CABundle: write("ca.pem", "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"),
		Version:  "v1.2.3", Revision: "0123abcd",
	}
}

// files returns the files of img's flattened filesystem with their
// headers.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out["/"+strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return out
}

// TestBuildIsReproducible: two builds of the same binaries give the same
// digest; every platform's image has the entrypoint, user, ports, labels,
// the binary, the CA bundle and the nonroot user, with fixed times.
func TestBuildIsReproducible(t *testing.T) {
	cfg := testConfig(t)
	a, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds: %s and %s", da, db)
	}
	im, err := a.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("index manifests %+v", im.Manifests)
	}
	for _, m := range im.Manifests {
		img, err := a.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{BinaryPath}) || c.User != User || len(c.ExposedPorts) != 2 ||
			c.Labels["org.opencontainers.image.revision"] != "0123abcd" || c.Labels["org.opencontainers.image.version"] != "v1.2.3" ||
			cf.Architecture != m.Platform.Architecture || cf.Created.Unix() != 0 {
			t.Errorf("%s config %+v created %v", m.Platform.Architecture, c, cf.Created)
		}
		fs := files(t, img)
		bin := fs[BinaryPath]
		if bin == nil || bin.Mode != 0o755 || bin.Size != int64(len("\x7fELF amd64 fleetbench")) {
			t.Errorf("%s: binary %+v", m.Platform.Architecture, bin)
		}
		if h := fs["/home/nonroot"]; h == nil || h.Uid != 65532 {
			t.Errorf("home of nonroot %+v", h)
		}
		if fs[CABundlePath] == nil || fs["/etc/passwd"] == nil || fs["/tmp"] == nil || fs["/tmp"].Mode != 0o1777 {
			t.Errorf("base files missing: %v", slices.Sorted(func(yield func(string) bool) {
				for k := range fs {
					if !yield(k) {
						return
					}
				}
			}))
		}
		for n, h := range fs {
			if !h.ModTime.Equal(epoch) {
				t.Errorf("%s has time %v", n, h.ModTime)
			}
		}
	}
	// A bad config is refused with every reason.
	if _, err := Build(Config{Binaries: []Binary{{Platform: "amd64"}}}); err == nil ||
		!strings.Contains(err.Error(), "want os/arch") || !strings.Contains(err.Error(), "no binary path") {
		t.Errorf("bad config: %v", err)
	}
}

// TestPushAndPull pushes to a registry on loopback, pulls the index back
// with the same digest, and writes an OCI layout that reads back too.
func TestPushAndPull(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	idx, err := Build(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/fleetbench/fleetbench:test"
	d, err := Push(t.Context(), ref, idx, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	if pd, _ := pulled.Digest(); pd != d {
		t.Errorf("pulled %s, pushed %s", pd, d)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, idx); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	li, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if ld, _ := li.Digest(); ld != d {
		t.Errorf("layout index %s, pushed %s", ld, d)
	}
	if _, err := Push(t.Context(), "not a reference", idx, true); err == nil {
		t.Error("a bad reference was accepted")
	}
}

// TestDockerfileAgrees: the Dockerfile, kept for people who use Docker,
// has the same entrypoint, user and ports as the image built here.
func TestDockerfileAgrees(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var user, entry string
	var ports []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "USER":
			user = fields[1]
		case "EXPOSE":
			for _, p := range fields[1:] {
				ports = append(ports, p+"/tcp")
			}
		case "ENTRYPOINT":
			entry = strings.Join(fields[1:], " ")
		}
	}
	if user != User || entry != `["`+BinaryPath+`"]` || !slices.Equal(ports, Ports) {
		t.Errorf("Dockerfile: USER %q ENTRYPOINT %s EXPOSE %v; the image: %q [%q] %v", user, entry, ports, User, BinaryPath, Ports)
	}
}
