package ferry

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Codecs of Connect unary's Content-Encoding / Accept-Encoding, as the gateway names
// them. Every codec is klauspost/compress at its default level; "snappy" is the Snappy
// framing format (golang/snappy's NewBufferedWriter), "s2" the S2 stream format.
var codecs = map[string]bool{"identity": true, "gzip": true, "zstd": true, "snappy": true, "s2": true}

// Shared zstd coders: EncodeAll / DecodeAll are safe for concurrent use.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
)

// compressBody encodes a request body with codec ("identity" and "" leave it as is).
func compressBody(codec string, body []byte) ([]byte, error) {
	var b bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case "", "identity":
		return body, nil
	case "zstd":
		return zenc.EncodeAll(body, make([]byte, 0, len(body)/2)), nil
	case "gzip":
		w = gzip.NewWriter(&b)
	case "snappy":
		w = snappy.NewBufferedWriter(&b)
	case "s2":
		w = s2.NewWriter(&b)
	default:
		return nil, fmt.Errorf("unknown codec %q", codec)
	}
	b.Grow(len(body) / 2)
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decompressBody decodes an answer body sent with content-encoding coding.
func decompressBody(coding string, raw []byte) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "", "identity":
		return raw, nil
	case "zstd":
		return zdec.DecodeAll(raw, nil)
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		r = zr
	case "snappy":
		r = snappy.NewReader(bytes.NewReader(raw))
	case "s2":
		// Allocate as the blocks come (the filter writes 1 MiB blocks), not 1 MiB up front per answer.
		r = s2.NewReader(bytes.NewReader(raw), s2.ReaderMaxBlockSize(4<<20), s2.ReaderAllocBlock(64<<10))
	default:
		return nil, fmt.Errorf("unsupported content-encoding %q", coding)
	}
	var out bytes.Buffer
	out.Grow(len(raw) * 3)
	if _, err := io.Copy(&out, r); err != nil {
		return nil, fmt.Errorf("decoding %s answer: %w", coding, err)
	}
	return out.Bytes(), nil
}
