// Writes the Go-encoded fixtures of ferry-compress's tests (see ../generate.sh):
// what Go gRPC / Connect peers send, from Go's gzip and klauspost/compress.
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// payload is the fixtures' plaintext: the same rows the Rust tests build.
func payload(rows int) []byte {
	var b bytes.Buffer
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&b, "%d\tuser-%d\t%d\t2024-05-%02d\n", i, i, (i*7919)%10007, i%28+1)
	}
	return b.Bytes()
}

func write(dir, name string, data []byte) {
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		panic(err)
	}
}

func main() {
	dir := os.Args[1]
	for _, rows := range []int{0, 5000} {
		p := payload(rows)
		suffix := fmt.Sprintf("rows%d", rows)

		var b bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
		gz.Write(p)
		gz.Close()
		write(dir, "go-gzip-"+suffix+".gz", b.Bytes())

		b.Reset()
		kgz, _ := kgzip.NewWriterLevel(&b, 1)
		kgz.Write(p)
		kgz.Close()
		write(dir, "klauspost-gzip1-"+suffix+".gz", b.Bytes())

		// connect-compress's zstd at LevelFastest: a streaming writer, 1 MiB window.
		b.Reset()
		zw, _ := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true), zstd.WithEncoderConcurrency(1))
		zw.Write(p)
		zw.Close()
		write(dir, "klauspost-zstd-stream-"+suffix+".zst", b.Bytes())

		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
		write(dir, "klauspost-zstd-all-"+suffix+".zst", enc.EncodeAll(p, nil))

		// golang/snappy's NewBufferedWriter (klauspost's drop-in: s2 in snappy mode).
		b.Reset()
		sw := snappy.NewBufferedWriter(&b)
		sw.Write(p)
		sw.Close()
		write(dir, "go-snappy-"+suffix+".sz", b.Bytes())

		b.Reset()
		s2w := s2.NewWriter(&b, s2.WriterConcurrency(1))
		s2w.Write(p)
		s2w.Close()
		write(dir, "klauspost-s2-"+suffix+".s2", b.Bytes())
	}
}
