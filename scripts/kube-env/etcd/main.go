// Command etcd is the etcd v3.6 server, built from go.etcd.io/etcd/server/v3
// because the proxy does not serve the go.etcd.io/etcd/v3 root module that
// holds etcd's own main. It is etcd's main.go, verbatim in behaviour.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
