// Generated clients against a Ferry gateway: code generated from our own proto/ files
// (gen/, see generate.sh) driven by the two common Go RPC stacks,
//
//   - google.golang.org/grpc (grpc-go) over HTTP/2. grpc-go has no HTTP/3 transport
//     (its transport is its own HTTP/2 implementation over TCP), so it runs on HTTP/2 only;
//   - connectrpc.com/connect (connect-go) over HTTP/2 (net/http) and HTTP/3 (quic-go's
//     http3.Transport), with the Connect protocol (binary proto) and with the gRPC
//     protocol (connect.WithGRPC()),
//
// each with requests and answers gzip-compressed (grpc-go's encoding/gzip, connect-go's
// built-in gzip) and without compression in either direction.
//
//	FERRY_URL=https://127.0.0.1:18443 FERRY_USER=ferry FERRY_PASSWORD=ferry \
//	FERRY_CA=.run/e2e/certs/ca.pem go run .
//
// FERRY_GRPCGO_RUN (a regexp on the variant name, e.g. 'h3' or 'grpc-go/.*/gzip') picks
// variants. One line per check; exits non-zero if any check fails.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"
)

type config struct {
	addr     string // host:port
	user, pw string
	tls      *tls.Config
	run      *regexp.Regexp
	protoDir string
}

// variant is one client stack: which library, which HTTP version, which wire protocol,
// compressed or not.
type variant struct {
	client    string // "grpc-go" | "connect-go"
	transport string // "h2" | "h3"
	protocol  string // "grpc" | "connect"
	gzip      bool
}

func (v variant) String() string {
	enc := "identity"
	if v.gzip {
		enc = "gzip"
	}
	return v.client + "/" + v.transport + "/" + v.protocol + "/" + enc
}

func variants() []variant {
	var out []variant
	for _, gz := range []bool{false, true} {
		out = append(out, variant{"grpc-go", "h2", "grpc", gz})
	}
	for _, tr := range []string{"h2", "h3"} {
		for _, proto := range []string{"connect", "grpc"} {
			for _, gz := range []bool{false, true} {
				out = append(out, variant{"connect-go", tr, proto, gz})
			}
		}
	}
	return out
}

var failures int

func pass(v, name, format string, a ...any) {
	fmt.Printf("PASS %-32s %-36s %s\n", v, name, fmt.Sprintf(format, a...))
}

func fail(v, name, format string, a ...any) {
	failures++
	fmt.Printf("FAIL %-32s %-36s %s\n", v, name, fmt.Sprintf(format, a...))
}

func skip(v, name, format string, a ...any) {
	fmt.Printf("SKIP %-32s %-36s %s\n", v, name, fmt.Sprintf(format, a...))
}

func main() {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpc-go:", err)
		os.Exit(2)
	}
	// Every call has its own deadline; this ends a run that hangs anyway.
	time.AfterFunc(10*time.Minute, func() {
		fmt.Println("FAIL watchdog: no result after 10 minutes")
		os.Exit(1)
	})
	checkGenerated(cfg)
	ran := 0
	for _, v := range variants() {
		if cfg.run != nil && !cfg.run.MatchString(v.String()) {
			continue
		}
		ran++
		runVariant(cfg, v)
	}
	if cfg.run == nil || cfg.run.MatchString("grpc-go/h3") {
		skip("grpc-go/h3", "(all checks)", "grpc-go has no HTTP/3 transport; HTTP/3 is covered by connect-go (Connect and gRPC protocols)")
	}
	if ran == 0 {
		fmt.Printf("grpc-go: FERRY_GRPCGO_RUN=%q matches no variant\n", cfg.run)
		os.Exit(2)
	}
	if failures > 0 {
		fmt.Printf("grpc-go: %d check(s) FAILED\n", failures)
		os.Exit(1)
	}
	fmt.Println("grpc-go: all checks passed")
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func loadConfig() (config, error) {
	var c config
	raw := envOr("FERRY_URL", "https://127.0.0.1:8443")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Port() == "" {
		return c, fmt.Errorf("FERRY_URL must be https://host:port, got %q", raw)
	}
	c.addr = u.Host
	c.user = envOr("FERRY_USER", "ferry")
	c.pw = envOr("FERRY_PASSWORD", "ferry")
	c.tls = &tls.Config{MinVersion: tls.VersionTLS13}
	if ca := os.Getenv("FERRY_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return c, fmt.Errorf("FERRY_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return c, fmt.Errorf("FERRY_CA %s: no PEM certificate in it", ca)
		}
		c.tls.RootCAs = pool
	}
	if r := os.Getenv("FERRY_GRPCGO_RUN"); r != "" {
		if c.run, err = regexp.Compile(r); err != nil {
			return c, fmt.Errorf("FERRY_GRPCGO_RUN: %w", err)
		}
	}
	c.protoDir = envOr("FERRY_PROTO_DIR", "../../proto")
	return c, nil
}

func basicAuth(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}
