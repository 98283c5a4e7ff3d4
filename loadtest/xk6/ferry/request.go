package ferry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/klauspost/compress/zstd"
)

// request is one psdb Execute call in Connect unary JSON, as @planetscale/database sends it.
type request struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   []byte
	hdr    http.Header
	url    string
}

func newRequest(parent context.Context, o options, sql string, session json.RawMessage) *request {
	msg := map[string]any{"query": sql}
	if len(session) > 0 {
		msg["session"] = session
	}
	body, _ := json.Marshal(msg) // strings and raw JSON always marshal
	h := http.Header{}
	h.Set("content-type", "application/json")
	h.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.user+":"+o.password)))
	for k, v := range o.headers {
		h.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	return &request{ctx: ctx, cancel: cancel, body: body, hdr: h,
		url: o.base + "/psdb.v1alpha1.Database/Execute"}
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
	body    string
	proto   string
	resumed bool
	early   string
	coding  string // the answer's content-encoding ("" = identity)
}

// readBody reads the whole answer, decoding gzip/zstd if the server chose one
// (only when a script sends accept-encoding itself, as the compression sweep does).
func readBody(res *http.Response) (string, error) {
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	switch res.Header.Get("content-encoding") {
	case "", "identity":
		return string(raw), nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return "", err
		}
		out, err := io.ReadAll(zr)
		return string(out), err
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			return "", err
		}
		defer zr.Close()
		out, err := io.ReadAll(zr)
		return string(out), err
	default:
		return "", fmt.Errorf("unsupported content-encoding %q", res.Header.Get("content-encoding"))
	}
}
