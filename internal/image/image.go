package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed settings; the Dockerfile says the same (a test checks).
const (
	// BinaryPath is where the binary goes and the entrypoint.
	BinaryPath = "/usr/local/bin/fleetbench"
	// User is the nonroot user and group the image runs as.
	User = "65532:65532"
	// CABundlePath is where the CA bundle goes (Go's crypto/x509 reads it).
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultCABundle is Debian's ca-certificates bundle on the build
	// machine.
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the OCI source label.
	Source = "https://github.com/fleetbench/fleetbench"
)

// Ports are the ports the image exposes: 7070 the coordinator's gRPC port
// for agents, 9090 metrics.
var Ports = []string{"7070/tcp", "9090/tcp"}

// epoch is every file's and the config's time: a fixed time makes the
// build reproducible.
var epoch = time.Unix(0, 0).UTC()

// Binary is one platform's static fleetbench binary.
type Binary struct {
	// Platform is "os/arch" (linux/amd64, linux/arm64).
	Platform string
	// Path is the binary on the build machine.
	Path string
}

// Config is one image build. It is a plain value.
type Config struct {
	// Binaries, one per platform, at least one.
	Binaries []Binary
	// CABundle is the PEM bundle to install (default DefaultCABundle).
	CABundle string
	// Version and Revision are the OCI version and revision labels (the
	// release and the git commit).
	Version, Revision string
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Binaries) == 0 {
		errs = append(errs, errors.New("image: no binary (give one per platform, os/arch=path)"))
	}
	seen := map[string]bool{}
	for _, b := range c.Binaries {
		os, arch, ok := strings.Cut(b.Platform, "/")
		if !ok || os == "" || arch == "" {
			errs = append(errs, fmt.Errorf("image: platform %q: want os/arch, e.g. linux/amd64", b.Platform))
		}
		if seen[b.Platform] {
			errs = append(errs, fmt.Errorf("image: platform %s given twice", b.Platform))
		}
		seen[b.Platform] = true
		if b.Path == "" {
			errs = append(errs, fmt.Errorf("image: platform %s: no binary path", b.Platform))
		}
	}
	return errors.Join(errs...)
}

// Build builds the multi-platform image index: one image per binary, in
// the order given.
func Build(c Config) (v1.ImageIndex, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	caPath := c.CABundle
	if caPath == "" {
		caPath = DefaultCABundle
	}
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	base, err := layer(baseFiles(ca))
	if err != nil {
		return nil, fmt.Errorf("build base layer: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range c.Binaries {
		img, err := platformImage(c, b, base)
		if err != nil {
			return nil, err
		}
		osName, arch, _ := strings.Cut(b.Platform, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	return idx, nil
}

// platformImage is one platform's image: the base layer and the binary.
func platformImage(c Config, b Binary, base v1.Layer) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("read %s binary: %w", b.Platform, err)
	}
	binLayer, err := layer([]file{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, fmt.Errorf("build %s binary layer: %w", b.Platform, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, binLayer)
	if err != nil {
		return nil, fmt.Errorf("build %s image: %w", b.Platform, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("build %s image: %w", b.Platform, err)
	}
	cf = cf.DeepCopy()
	osName, arch, _ := strings.Cut(b.Platform, "/")
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = imageConfig(c)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("build %s image: %w", b.Platform, err)
	}
	return img, nil
}

// imageConfig is the runtime configuration every platform's image has.
func imageConfig(c Config) v1.Config {
	ports := map[string]struct{}{}
	for _, p := range Ports {
		ports[p] = struct{}{}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":  "fleetbench",
		"org.opencontainers.image.source": Source,
	}
	if c.Version != "" {
		labels["org.opencontainers.image.version"] = c.Version
	}
	if c.Revision != "" {
		labels["org.opencontainers.image.revision"] = c.Revision
	}
	return v1.Config{
		Entrypoint:   []string{BinaryPath},
		User:         User,
		WorkingDir:   "/home/nonroot",
		ExposedPorts: ports,
		Labels:       labels,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=" + CABundlePath,
		},
	}
}

// file is one entry of a layer.
type file struct {
	name     string // relative, "/"-separated; directories end in "/"
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseFiles are the root's files: the CA bundle, the users and groups,
// the nonroot user's home and /tmp.
func baseFiles(ca []byte) []file {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	return []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
}

// layer makes a gzip layer of files, sorted by name, with fixed times and
// owners: the same files always give the same digest.
func layer(files []file) (v1.Layer, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: epoch,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write %s: %w", path.Clean(f.name), err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("write %s: %w", path.Clean(f.name), err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
