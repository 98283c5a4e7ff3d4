// Command mesh-registry serves an in-memory OCI registry (go-containerregistry's
// pkg/registry) on a loopback address, for scripts/test-mesh.sh: Envoy Gateway pulls the
// Ferry filter's image from it (`code.type: Image`), as it would from any registry.
// Plain HTTP: go-containerregistry, which both the pusher (target/ferry-oci) and Envoy
// Gateway's image fetcher use, speaks HTTP to loopback addresses without being told.
//
//	mesh-registry --addr 127.0.0.1:18464
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18464", "listen address (loopback only)")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		fmt.Fprintln(os.Stderr, "mesh-registry: --addr must be a loopback IP address")
		os.Exit(2)
	}
	srv := &http.Server{
		Addr:              *addr,
		Handler:           registry.New(registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("serving an OCI registry on http://%s", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
