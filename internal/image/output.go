package image

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout writes idx as an OCI image layout in dir (oci-layout,
// index.json, blobs/), replacing what dir held.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write image layout: %w", err)
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("write image layout %s: %w", dir, err)
	}
	return nil
}

// Push pushes idx to ref (registry/repository:tag) with the credentials
// of the default keychain (docker config, credential helpers), and returns
// the digest to pin it by. insecure allows a plain-HTTP registry.
func Push(ctx context.Context, ref string, idx v1.ImageIndex, insecure bool) (v1.Hash, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("push image %s: %w", r, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push image %s: %w", r, err)
	}
	return d, nil
}
