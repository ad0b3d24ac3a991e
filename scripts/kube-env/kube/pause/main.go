// Command pause is the real node's pod sandbox image: it holds a pod's
// namespaces and waits until the runtime stops it. The upstream pause image
// is a C program pulled from a registry; this one is built from source like
// everything else in kube-env, so nothing is pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of the sandbox it also reaps orphans that get reparented to it.
	signal.Ignore(syscall.SIGCHLD)
	<-sig
}
