// Package ferry is the k6 extension `k6/x/ferry`: a Ferry (psdb Connect JSON)
// client over HTTP/3 (quic-go) or HTTP/2 (Go net/http2), with the knobs k6's own
// http module lacks: a fresh connection per request (cold start), TLS session
// resumption on/off, and HTTP/3 0-RTT. Bytes are counted at the socket and
// pushed into k6's data_sent / data_received, like k6 does for its own http.
//
//	import ferry from 'k6/x/ferry';
//	const c = ferry.client({ url, proto: 'h3', ca, user, password,
//	                         fresh: true, resume: true, zeroRtt: true,
//	                         session: true,   // send back each answer's session, as the driver does
//	                         codec: 'zstd',   // Content-Encoding of requests ≥ minBytes (1024) + Accept-Encoding
//	                         format: 'json'}); // or 'proto' (Connect unary application/proto)
//	// url 'http://host:port' with proto 'h2': h2c (HTTP/2 without TLS, prior knowledge), for
//	// plaintext servers such as ps-http-sim (loadtest/pssim.sh)
//	const r = c.execute('SELECT 1'); // {ms, status, body, proto, resumed, early, encoding, error}
//
// Compression (codec.go): the request is compressed and the answer decoded inside the
// timed call, with klauspost/compress; bytes are still counted at the socket.
package ferry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.k6.io/k6/js/modules"

	"ferry/loadtest/xk6/wire"
)

func init() { modules.Register("k6/x/ferry", new(root)) }

type root struct{}

func (*root) NewModuleInstance(vu modules.VU) modules.Instance { return &instance{vu: vu} }

type instance struct{ vu modules.VU }

func (i *instance) Exports() modules.Exports { return modules.Exports{Default: i} }

// Client makes a client for one VU. Options: see parseOptions.
func (i *instance) Client(opts map[string]any) (*Client, error) {
	o, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{vu: i.vu, o: o}
	switch o.proto {
	case "h3":
		c.rt, err = newH3(o, &c.cnt)
	case "h2":
		c.rt, err = newH2(o, &c.cnt)
	}
	return c, err
}

// ticketWait bounds how long a fresh connection waits for the server's session ticket.
const ticketWait = 500 * time.Millisecond

// Client is one logical client (one connection at a time) of one VU.
type Client struct {
	vu  modules.VU
	o   options
	cnt wire.Counter
	rt  roundTripper
	// session: the last answer's psdb session (with o.session), sent with the next
	// request: JSON, or the raw Session message with format "proto".
	session []byte
}

// roundTripper is one protocol's way to send a request and read the answer.
type roundTripper interface {
	do(r *request) (*result, error)
	close()
}

// Execute runs one SQL statement and returns what the script needs to check it.
func (c *Client) Execute(sql string) map[string]any {
	return c.call(newRequest(c.vu.Context(), c.o, sql, c.session))
}

// Batch runs one ExecuteBatch (statements: a JSON array, mode TRANSACTION or PIPELINE,
// key: an Idempotency-Key or ""), in Connect JSON whatever the client's format.
func (c *Client) Batch(statements, mode, key string) map[string]any {
	o := c.o
	o.format = "json"
	return c.callAs(o, newBatchRequest(c.vu.Context(), o, statements, mode, key, c.session))
}

func (c *Client) call(r *request) map[string]any { return c.callAs(c.o, r) }

// callAs sends r and reads its answer with options o (the client's, or a batch's JSON).
func (c *Client) callAs(o options, r *request) map[string]any {
	defer r.cancel()
	if c.o.fresh && c.o.tickets != nil {
		c.o.tickets.reset()
	}
	start := time.Now()
	err := r.compress()
	var res *result
	if err == nil {
		res, err = c.rt.do(r)
	}
	ms := float64(time.Since(start).Nanoseconds()) / 1e6
	ticket := false
	if c.o.fresh {
		if c.o.tickets != nil && err == nil {
			ticket = c.o.tickets.wait(ticketWait) // see tickets.go; not timed
		}
		c.rt.close() // part of a cold start: the close is counted in the bytes
	}
	out := map[string]any{"ms": ms, "status": 0, "body": "", "error": ""}
	if err != nil {
		out["error"] = err.Error()
		c.rt.close() // never reuse a broken connection
	} else {
		out["status"], out["proto"] = res.status, res.proto
		out["resumed"], out["early"], out["encoding"] = res.resumed, res.early, res.coding
		out["ticket"] = ticket
		if o.format == "proto" && res.status == 200 {
			session, rpcErr, perr := protoAnswer(res.body)
			switch {
			case perr != nil:
				out["error"] = "unparsable answer: " + perr.Error()
			case res.ctype != "application/proto":
				out["error"] = "answer content-type " + res.ctype
			default:
				out["error"] = rpcErr
			}
			if c.o.session && len(session) > 0 {
				c.session = bytes.Clone(session) // the body's buffer is reused
			}
		} else {
			out["error"] = answerError(res)
			if c.o.session {
				var a struct {
					Session json.RawMessage `json:"session"`
				}
				if json.Unmarshal(res.body, &a) == nil && len(a.Session) > 0 {
					c.session = a.Session
				}
			}
			if len(res.body) <= 4096 { // big bodies stay in Go: copying 37 MB into JS costs more than the request
				out["body"] = string(res.body)
			}
		}
	}
	out["sent"], out["recv"] = c.pushBytes()
	return out
}

// answerError is "" for a good answer, else the HTTP status or the psdb error
// (SQL errors come back as HTTP 200 with a top-level "error" object).
func answerError(res *result) string {
	if res.status != 200 {
		return fmt.Sprintf("HTTP %d: %.200s", res.status, res.body)
	}
	if !bytes.Contains(res.body, []byte(`"error"`)) { // values are base64: the key cannot appear inside them
		return ""
	}
	var a struct {
		Error *struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(res.body, &a); err != nil {
		return "unparsable answer: " + err.Error()
	}
	if a.Error == nil {
		return ""
	}
	return a.Error.Code + ": " + a.Error.Message
}

// Close drops the current connection.
func (c *Client) Close() { c.rt.close(); c.pushBytes() }

// pushBytes reports the socket bytes since the last call (see wire.Push).
func (c *Client) pushBytes() (sent, recv int64) { return wire.Push(c.vu, &c.cnt) }
