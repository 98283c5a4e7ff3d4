package ferry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"time"
)

// options of a client, from the script's object.
type options struct {
	proto    string // "h2" or "h3"
	base     string // https://host:port, or http://host:port for h2c (HTTP/2 without TLS, h2 only)
	addr     string // host:port to dial
	user     string // Basic auth
	password string
	fresh    bool              // a new connection for every request (cold start)
	resume   bool              // keep a TLS session cache across connections
	zeroRTT  bool              // h3: send the request as 0-RTT early data when resuming
	session  bool              // carry the psdb session from each answer into the next request
	headers  map[string]string // extra request headers (e.g. accept-encoding)
	codec    string            // "": no compression headers; else Content-Encoding of requests ≥ minBytes + Accept-Encoding
	minBytes int               // requests smaller than this go uncompressed (with codec set)
	format   string            // "json" (application/json) or "proto" (application/proto)
	timeout  time.Duration
	tls      *tls.Config // nil: h2c (an http:// url), prior knowledge, no TLS
	tickets  *tickets    // the session cache when resume is on
}

func parseOptions(m map[string]any) (options, error) {
	str := func(k, def string) string {
		if v, ok := m[k].(string); ok && v != "" {
			return v
		}
		return def
	}
	flag := func(k string) bool { v, _ := m[k].(bool); return v }
	o := options{
		proto: str("proto", "h3"), base: str("url", "https://127.0.0.1:8443"),
		user: str("user", "ferry"), password: str("password", "ferry"),
		fresh: flag("fresh"), resume: flag("resume"), zeroRTT: flag("zeroRtt"), session: flag("session"),
		headers: map[string]string{}, timeout: 120 * time.Second,
		codec: str("codec", ""), format: str("format", "json"), minBytes: 1024,
	}
	if o.codec != "" && !codecs[o.codec] {
		return o, fmt.Errorf("codec must be identity, gzip, zstd, snappy or s2, got %q", o.codec)
	}
	if o.format != "json" && o.format != "proto" {
		return o, fmt.Errorf("format must be json or proto, got %q", o.format)
	}
	if n, ok := m["minBytes"].(int64); ok && n >= 0 {
		o.minBytes = int(n)
	}
	if o.proto != "h2" && o.proto != "h3" {
		return o, fmt.Errorf("proto must be h2 or h3, got %q", o.proto)
	}
	if o.zeroRTT && (o.proto != "h3" || !o.resume) {
		return o, fmt.Errorf("zeroRtt needs proto h3 and resume")
	}
	if h, ok := m["headers"].(map[string]any); ok {
		for k, v := range h {
			o.headers[k] = fmt.Sprint(v)
		}
	}
	if s, ok := m["timeoutSeconds"].(int64); ok && s > 0 {
		o.timeout = time.Duration(s) * time.Second
	}
	u, err := url.Parse(o.base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Port() == "" {
		return o, fmt.Errorf("url must be https://host:port (or http://host:port: h2c), got %q", o.base)
	}
	o.addr = u.Host
	if u.Scheme == "http" {
		// h2c with prior knowledge (a plaintext server such as ps-http-sim): no TLS, so
		// nothing to resume.
		if o.proto != "h2" || o.resume {
			return o, fmt.Errorf("an http:// url (h2c) needs proto h2 and no resume")
		}
		return o, nil
	}
	o.tls = &tls.Config{MinVersion: tls.VersionTLS13, ServerName: str("serverName", u.Hostname())}
	if ca := str("ca", ""); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return o, err
		}
		o.tls.RootCAs = x509.NewCertPool()
		if !o.tls.RootCAs.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("no certificate in %s", ca)
		}
	}
	if o.resume {
		o.tickets = newTickets()
		o.tls.ClientSessionCache = o.tickets
	}
	return o, nil
}
