package ferry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
)

// request is one psdb Execute call in Connect unary JSON, as @planetscale/database
// sends it, or Connect unary proto (format "proto").
type request struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   []byte
	hdr    http.Header
	url    string
	codec  string // compress the body with this codec in compress()
	min    int    // ... when it has at least this many bytes
}

// newRequest builds the call; session is the previous answer's session (JSON, or the
// raw Session message for proto), nil for none.
func newRequest(parent context.Context, o options, sql string, session []byte) *request {
	var body []byte
	h := http.Header{}
	if o.format == "proto" {
		body = protoRequest(sql, session)
		h.Set("content-type", "application/proto")
	} else {
		msg := map[string]any{"query": sql}
		if len(session) > 0 {
			msg["session"] = json.RawMessage(session)
		}
		body, _ = json.Marshal(msg) // strings and raw JSON always marshal
		h.Set("content-type", "application/json")
	}
	h.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.user+":"+o.password)))
	if o.codec != "" {
		h.Set("accept-encoding", o.codec)
	}
	for k, v := range o.headers {
		h.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	return &request{ctx: ctx, cancel: cancel, body: body, hdr: h, codec: o.codec, min: o.minBytes,
		url: o.base + "/psdb.v1alpha1.Database/Execute"}
}

// newBatchRequest is one ExecuteBatch call (ferry.v1alpha1.Database) in Connect unary
// JSON: statements is the JSON array of the request's statements, mode TRANSACTION or
// PIPELINE; key, if not empty, is its Idempotency-Key.
func newBatchRequest(parent context.Context, o options, statements, mode, key string, session []byte) *request {
	msg := map[string]any{"statements": json.RawMessage(statements), "mode": mode}
	if len(session) > 0 {
		msg["session"] = json.RawMessage(session)
	}
	body, _ := json.Marshal(msg) // the script's JSON is checked by the server
	h := http.Header{}
	h.Set("content-type", "application/json")
	h.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.user+":"+o.password)))
	if key != "" {
		h.Set("idempotency-key", key)
	}
	for k, v := range o.headers {
		h.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	return &request{ctx: ctx, cancel: cancel, body: body, hdr: h, min: o.minBytes,
		url: o.base + "/ferry.v1alpha1.Database/ExecuteBatch"}
}

// compress encodes the body with the client's codec (Connect unary: Content-Encoding),
// unless it is identity or the body is smaller than the floor. Called inside the timed
// part of a call: compressing is the client's cost of the codec.
func (r *request) compress() error {
	if r.codec == "" || r.codec == "identity" || len(r.body) < r.min {
		return nil
	}
	b, err := compressBody(r.codec, r.body)
	if err != nil {
		return err
	}
	r.body = b
	r.hdr.Set("content-encoding", r.codec)
	return nil
}

// httpRequest builds the net/http request; withBody=false for HTTP/3 streams,
// where the body is written separately.
func (r *request) httpRequest(withBody bool) *http.Request {
	var body io.Reader
	if withBody {
		body = bytes.NewReader(r.body)
	}
	req, _ := http.NewRequestWithContext(r.ctx, http.MethodPost, r.url, body) // url is checked at parse
	req.Header = r.hdr.Clone()
	req.ContentLength = int64(len(r.body))
	return req
}

// result of one request. early: "" (no 0-RTT tried), "accepted", "rejected", "425".
type result struct {
	status  int
	body    []byte // valid until the client's next request (its buffer is reused)
	proto   string
	resumed bool
	early   string
	coding  string // the answer's content-encoding ("" = identity)
	ctype   string // the answer's content-type
}

// readBody reads the whole answer into buf (one buffer per client, reused from call to
// call: a large answer costs the copy out of the transport, not io.ReadAll's doublings
// and a string copy, as the MySQL driver reads rows in place) and decodes it if the
// server compressed it (identity, gzip, zstd, snappy, s2: codec.go).
func readBody(res *http.Response, buf *bytes.Buffer) ([]byte, error) {
	defer res.Body.Close()
	buf.Reset()
	if n := res.ContentLength; n > 0 && n < 1<<31 {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return nil, err
	}
	return decompressBody(res.Header.Get("content-encoding"), buf.Bytes())
}
