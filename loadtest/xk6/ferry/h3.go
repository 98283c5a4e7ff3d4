package ferry

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"ferry/loadtest/xk6/wire"
)

// h3 is HTTP/3 over QUIC. One UDP socket per client (counted); a new QUIC
// connection per cold start. With zeroRTT the request goes out in the first
// flight (DialEarly + a raw request stream: http3.Transport only does 0-RTT for
// GET, and psdb is POST), so a resumed cold start costs one round trip.
type h3 struct {
	o     options
	tr    *quic.Transport
	h3    *http3.Transport
	qcfg  *quic.Config
	raddr *net.UDPAddr
	conn  *quic.Conn
	cc    *http3.ClientConn
	dials int          // the first connection has no ticket, so cannot try 0-RTT
	buf   bytes.Buffer // the last answer (readBody)
	raw   bytes.Buffer // its DATA frames as read off the stream (readResponse), reused likewise
}

func newH3(o options, cnt *wire.Counter) (*h3, error) {
	raddr, err := net.ResolveUDPAddr("udp", o.addr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	o.tls = o.tls.Clone()
	o.tls.NextProtos = []string{http3.NextProtoH3}
	return &h3{
		o: o, raddr: raddr,
		tr:   &quic.Transport{Conn: wire.NewUDPConn(udp, cnt)},
		h3:   &http3.Transport{DisableCompression: true},
		qcfg: &quic.Config{},
	}, nil
}

func (c *h3) connect(r *request) (err error) {
	if c.o.zeroRTT {
		c.conn, err = c.tr.DialEarly(r.ctx, c.raddr, c.o.tls, c.qcfg)
	} else {
		c.conn, err = c.tr.Dial(r.ctx, c.raddr, c.o.tls, c.qcfg)
	}
	if err != nil {
		return err
	}
	c.cc = c.h3.NewClientConn(c.conn)
	c.dials++
	return nil
}

func (c *h3) do(r *request) (*result, error) {
	if c.conn == nil || c.conn.Context().Err() != nil {
		c.close()
		if err := c.connect(r); err != nil {
			return nil, err
		}
	}
	early := ""
	if c.o.zeroRTT && c.dials > 1 {
		early = "accepted" // a ticket is cached: until the server says otherwise
	}
	res, err := c.send(r)
	if errors.Is(err, quic.Err0RTTRejected) {
		// The server refused the early data: resend once the handshake is done.
		early = "rejected"
		if c.conn, err = c.conn.NextConnection(r.ctx); err != nil {
			return nil, err
		}
		c.cc = c.h3.NewClientConn(c.conn)
		res, err = c.send(r)
	}
	if err == nil && res.StatusCode == http.StatusTooEarly && early != "" {
		// RFC 8470: the gateway will not act on this request in early data; retry after the handshake.
		early = "425"
		res.Body.Close()
		select {
		case <-c.conn.HandshakeComplete():
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		}
		res, err = c.send(r)
	}
	if err != nil {
		return nil, err
	}
	body, err := readBody(res, &c.buf)
	if err != nil {
		return nil, err
	}
	st := c.conn.ConnectionState()
	if early == "accepted" && !st.Used0RTT {
		early = "rejected"
	}
	return &result{status: res.StatusCode, body: body, proto: "h3",
		resumed: st.TLS.DidResume, early: early, coding: res.Header.Get("content-encoding"),
		ctype: res.Header.Get("content-type")}, nil
}

// send writes one request on a raw QUIC stream — HEADERS (QPACK, static table
// only) + DATA + FIN in one write — and reads the HEADERS and DATA frames back.
// Framed by hand because quic-go's http3 holds a POST until the handshake is
// done (no 0-RTT), and its RequestStream API always announces content-length 0
// for a request whose body is written separately.
func (c *h3) send(r *request) (*http.Response, error) {
	str, err := c.conn.OpenStreamSync(r.ctx)
	if err != nil {
		return nil, err
	}
	if dl, ok := r.ctx.Deadline(); ok {
		_ = str.SetDeadline(dl)
	}
	var hb bytes.Buffer
	enc := qpack.NewEncoder(&hb)
	u, _ := url.Parse(r.url) // checked at parse time
	fields := []qpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: u.Host}, {Name: ":path", Value: u.RequestURI()},
		{Name: "content-length", Value: strconv.Itoa(len(r.body))}}
	for k, vs := range r.hdr {
		for _, v := range vs {
			fields = append(fields, qpack.HeaderField{Name: strings.ToLower(k), Value: v})
		}
	}
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			return nil, err
		}
	}
	msg := appendFrame(appendFrame(nil, 0x01, hb.Bytes()), 0x00, r.body)
	if _, err := str.Write(msg); err != nil {
		return nil, err
	}
	if err := str.Close(); err != nil {
		return nil, err
	}
	return readResponse(bufio.NewReaderSize(str, 64<<10), &c.raw)
}

// appendFrame appends one HTTP/3 frame: type, length, payload.
func appendFrame(b []byte, typ uint64, payload []byte) []byte {
	b = quicvarint.Append(quicvarint.Append(b, typ), uint64(len(payload)))
	return append(b, payload...)
}

// readResponse reads frames until FIN: the final HEADERS (1xx skipped), the DATA,
// and ignores trailers and unknown (reserved/grease) frame types.
// body is reset and holds the DATA (the response's Body reads it).
func readResponse(br *bufio.Reader, body *bytes.Buffer) (*http.Response, error) {
	res := &http.Response{Header: http.Header{}, Proto: "HTTP/3.0", ProtoMajor: 3}
	body.Reset()
	for {
		typ, err := quicvarint.Read(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading response: %w", err)
		}
		n, err := quicvarint.Read(br)
		if err != nil {
			return nil, fmt.Errorf("reading response: %w", err)
		}
		switch {
		case typ == 0x00 && res.StatusCode != 0: // DATA
			if _, err := io.CopyN(body, br, int64(n)); err != nil {
				return nil, fmt.Errorf("reading response body: %w", err)
			}
		case typ == 0x01 && res.StatusCode == 0: // HEADERS (a later one is the trailers)
			block := make([]byte, n)
			if _, err := io.ReadFull(br, block); err != nil {
				return nil, err
			}
			if err := decodeHead(res, block); err != nil {
				return nil, err
			}
		default:
			if _, err := br.Discard(int(n)); err != nil {
				return nil, err
			}
		}
	}
	if res.StatusCode == 0 {
		return nil, errors.New("reading response: stream ended without a response")
	}
	res.Body = io.NopCloser(body)
	res.ContentLength = int64(body.Len())
	return res, nil
}

// decodeHead fills status and headers from a QPACK block; a 1xx leaves the status unset.
func decodeHead(res *http.Response, block []byte) error {
	next := qpack.NewDecoder().Decode(block)
	for {
		f, err := next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("decoding response headers: %w", err)
		}
		if f.Name == ":status" {
			code, err := strconv.Atoi(f.Value)
			if err != nil {
				return fmt.Errorf("bad :status %q", f.Value)
			}
			if code >= 200 {
				res.StatusCode = code
			}
			continue
		}
		res.Header.Add(f.Name, f.Value)
	}
}

func (c *h3) close() {
	if c.conn != nil {
		c.conn.CloseWithError(0, "")
		c.conn, c.cc = nil, nil
	}
}
