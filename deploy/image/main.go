// Command image builds fleetbench's OCI image without a Docker daemon
// (internal/image): it writes an OCI image layout and, with --push, pushes the
// multi-platform index to a registry. `make image` runs it with a static
// binary per platform; see deploy/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fleetbench/fleetbench/internal/image"
)

// binaries is the repeatable --binary os/arch=path flag.
type binaries []image.Binary

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(s string) error {
	p, path, ok := strings.Cut(s, "=")
	if !ok || p == "" || path == "" {
		return errors.New("want os/arch=path, e.g. linux/amd64=out/fleetbench-linux-amd64")
	}
	*b = append(*b, image.Binary{Platform: p, Path: path})
	return nil
}

func main() {
	var cfg image.Config
	var bins binaries
	var out, push string
	var insecure bool
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.Var(&bins, "binary", "a platform's static binary, os/arch=path (repeatable)")
	fs.StringVar(&cfg.CABundle, "ca-bundle", image.DefaultCABundle, "PEM CA bundle to install (Debian's ca-certificates)")
	fs.StringVar(&cfg.Version, "version", "", "OCI version label (the release)")
	fs.StringVar(&cfg.Revision, "revision", "", "OCI revision label (the git commit)")
	fs.StringVar(&out, "out", "out/image", "directory of the OCI image layout to write")
	fs.StringVar(&push, "push", "", "also push to this reference, registry/repository:tag")
	fs.BoolVar(&insecure, "insecure", false, "push over plain HTTP (a local registry)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	cfg.Binaries = bins
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, out, push, insecure); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg image.Config, out, push string, insecure bool) error {
	idx, err := image.Build(cfg)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("digest image: %w", err)
	}
	if err := image.WriteLayout(out, idx); err != nil {
		return err
	}
	fmt.Printf("image %s written to %s (OCI layout)\n", d, out)
	if push != "" {
		d, err := image.Push(ctx, push, idx, insecure)
		if err != nil {
			return err
		}
		ref, _, _ := strings.Cut(push, ":")
		fmt.Printf("pushed %s; pin it as %s@%s\n", push, ref, d)
	}
	return nil
}
