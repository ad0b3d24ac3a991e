// Package image builds fleetbench's OCI image without a Docker daemon, with
// go-containerregistry: one static binary per platform on a minimal root (a
// CA bundle for https targets, /etc/passwd with the nonroot user 65532,
// /tmp), as the Dockerfile's distroless image has it. The build is
// reproducible: every file and the image config carry fixed times, so two
// builds of the same binaries give the same digests. It imports no other
// fleetbench package and must not put credentials into a layer.
package image
