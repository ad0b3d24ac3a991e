package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// nodeReady waits until the real node has registered and is Ready, and
// prints why not when it gives up.
func nodeReady(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-ready", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig")
	name := fs.String("node", RealNode, "node name")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	last := "not registered"
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, *name, metav1.GetOptions{})
		if err == nil {
			if nodeReadyCondition(n) {
				return nil
			}
			last = "registered, not Ready"
			for _, c := range n.Status.Conditions {
				if c.Type == "Ready" {
					last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for node %s: %w (last: %s)", *name, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ociImage writes an OCI image archive (the layout `ctr images import`
// reads) holding one static binary as the entrypoint, named by the
// io.containerd.image.name annotation. Timestamps are zero: the same
// binary gives the same digest.
func ociImage(args []string) error {
	fs := flag.NewFlagSet("oci-image", flag.ContinueOnError)
	binary := fs.String("binary", "", "static binary to run")
	name := fs.String("name", "", "image reference, e.g. registry.k8s.io/pause:fleetbench")
	out := fs.String("out", "", "archive to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *name == "" || *out == "" {
		return errors.New("oci-image needs -binary, -name and -out")
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return fmt.Errorf("read binary: %w", err)
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "entrypoint", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(bin); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerDigest := digest(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/entrypoint"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{"application/vnd.oci.image.config.v1+json", digest(config), len(config), nil},
		"layers":        []descriptor{{"application/vnd.oci.image.layer.v1.tar", layerDigest, layer.Len(), nil}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{"application/vnd.oci.image.manifest.v1+json", digest(manifest), len(manifest),
			map[string]string{"io.containerd.image.name": *name, "org.opencontainers.image.ref.name": *name}}},
	})
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(digest(manifest)), manifest},
		{blobPath(digest(config)), config},
		{blobPath(layerDigest), layer.Bytes()},
	}
	for _, e := range files {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return errors.Join(err, f.Close())
		}
		if _, err := w.Write(e.data); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	if err := w.Close(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + d[len("sha256:"):] }
