package ferry

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"golang.org/x/net/http2"

	"ferry/loadtest/xk6/wire"
)

// h2 is HTTP/2 over TLS 1.3 on one TCP connection, dialled by hand so that the
// socket can be counted and a fresh connection made for each cold start; or, with an
// http:// url (o.tls nil), h2c: HTTP/2 in the clear with prior knowledge.
type h2 struct {
	o   options
	cnt *wire.Counter
	t   *http2.Transport
	cc  *http2.ClientConn
	tc  *tls.Conn
	buf bytes.Buffer // the last answer (readBody)
}

func newH2(o options, cnt *wire.Counter) (*h2, error) {
	if o.tls != nil {
		o.tls = o.tls.Clone() // ClientSessionCache is a pointer: still shared, as intended
		o.tls.NextProtos = []string{"h2"}
	}
	return &h2{o: o, cnt: cnt, t: &http2.Transport{DisableCompression: true, AllowHTTP: o.tls == nil}}, nil
}

func (c *h2) connect(r *request) error {
	var d net.Dialer
	raw, err := d.DialContext(r.ctx, "tcp", c.o.addr)
	if err != nil {
		return err
	}
	if c.o.tls == nil { // h2c
		cc, err := c.t.NewClientConn(&wire.Conn{Conn: raw, C: c.cnt})
		if err != nil {
			raw.Close()
			return err
		}
		c.cc = cc
		return nil
	}
	tc := tls.Client(&wire.Conn{Conn: raw, C: c.cnt}, c.o.tls)
	if err := tc.HandshakeContext(r.ctx); err != nil {
		raw.Close()
		return err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return fmt.Errorf("server chose ALPN %q, not h2", p)
	}
	cc, err := c.t.NewClientConn(tc)
	if err != nil {
		tc.Close()
		return err
	}
	c.cc, c.tc = cc, tc
	return nil
}

func (c *h2) do(r *request) (*result, error) {
	if c.cc == nil || !c.cc.CanTakeNewRequest() {
		c.close()
		if err := c.connect(r); err != nil {
			return nil, err
		}
	}
	res, err := c.cc.RoundTrip(r.httpRequest(true))
	if err != nil {
		return nil, err
	}
	body, err := readBody(res, &c.buf)
	if err != nil {
		return nil, err
	}
	return &result{status: res.StatusCode, body: body, proto: "h2",
		resumed: c.tc != nil && c.tc.ConnectionState().DidResume, coding: res.Header.Get("content-encoding"),
		ctype: res.Header.Get("content-type")}, nil
}

func (c *h2) close() {
	if c.cc != nil {
		c.cc.Close()
		c.cc, c.tc = nil, nil
	}
}

var _ http.RoundTripper = (*http2.ClientConn)(nil)
