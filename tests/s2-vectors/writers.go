package main

import (
	"bytes"
	"math/rand/v2"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
)

// writer turns raw data into one stream; name is part of every vector's name.
type writer struct {
	name   string
	encode func(raw []byte) ([]byte, error)
}

// writers: s2.Writer's option sets, and other producers s2.Reader accepts.
func writers() []writer {
	return []writer{
		s2Writer("default"),
		s2Writer("better", s2.WriterBetterCompression()),
		s2Writer("best", s2.WriterBestCompression()),
		s2Writer("conc1", s2.WriterConcurrency(1)),
		s2Writer("block64k", s2.WriterBlockSize(64<<10)),
		// Padding chunks (0xfe), filled from a seeded source so vectors are reproducible.
		s2Writer("padding", s2.WriterPadding(4096), s2.WriterPaddingSrc(rand.NewChaCha8([32]byte{7}))),
		// A seek index chunk (0x99) at the end.
		s2Writer("index", s2.WriterAddIndex(), s2.WriterBlockSize(64<<10)),
		s2Writer("uncompressed", s2.WriterUncompressed()),
		// Snappy framed streams ("sNaPpY", blocks of at most 64 KiB).
		s2Writer("snappy", s2.WriterSnappyCompat()),
		s2Writer("snappybest", s2.WriterSnappyCompat(), s2.WriterBestCompression()),
		{"golangsnappy", func(raw []byte) ([]byte, error) {
			var buf bytes.Buffer
			w := snappy.NewBufferedWriter(&buf)
			if _, err := w.Write(raw); err != nil {
				return nil, err
			}
			err := w.Close()
			return buf.Bytes(), err
		}},
		// Small writes, each flushed: many blocks of odd sizes.
		{"flushes", func(raw []byte) ([]byte, error) {
			var buf bytes.Buffer
			w := s2.NewWriter(&buf, s2.WriterConcurrency(1))
			for len(raw) > 0 {
				n := min(len(raw), 10007)
				if _, err := w.Write(raw[:n]); err != nil {
					return nil, err
				}
				if err := w.Flush(); err != nil {
					return nil, err
				}
				raw = raw[n:]
			}
			err := w.Close()
			return buf.Bytes(), err
		}},
		// Two streams back to back (the second one Snappy framed), read as one.
		{"concat", func(raw []byte) ([]byte, error) {
			half := len(raw) / 2
			first, err := s2Writer("", s2.WriterBestCompression()).encode(raw[:half])
			if err != nil {
				return nil, err
			}
			second, err := s2Writer("", s2.WriterSnappyCompat()).encode(raw[half:])
			return append(first, second...), err
		}},
	}
}

func s2Writer(name string, opts ...s2.WriterOption) writer {
	return writer{name, func(raw []byte) ([]byte, error) {
		var buf bytes.Buffer
		w := s2.NewWriter(&buf, opts...)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		err := w.Close()
		return buf.Bytes(), err
	}}
}
