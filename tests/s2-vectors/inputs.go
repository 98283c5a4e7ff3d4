package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

type vector struct {
	name   string
	raw    []byte
	writer writer
}

// Sizes around the block boundaries: Snappy's 64 KiB, S2's default 1 MiB, and a
// multi-block stream.
var (
	smallSizes = []int{0, 1, 2, 100, 4095, 65536, 65537}
	largeSizes = []int{1 << 20, 1<<20 + 1, 5 << 20}
)

// kind is a family of inputs; each stresses different block tags.
type kind struct {
	name string
	make func(r *rand.Rand, size int) []byte
}

var kinds = []kind{
	{"random", random},       // incompressible: uncompressed chunks
	{"zeros", zeros},         // one byte: overlapping copies, the longest repeats
	{"pattern", pattern},     // a short period
	{"text", text},           // words: ordinary copies
	{"records", records},     // near-identical records: repeat offsets
	{"longmatch", longmatch}, // far repeats of random data: 4-byte offsets
	{"mixed", mixed},         // all of these in one block: long literals among copies
}

// vectors: every writer × kind at the small sizes; the large sizes only for some
// pairs, which keeps the set (and the tests) fast while every writer still writes
// multi-block streams.
func vectors() []vector {
	var out []vector
	add := func(w writer, k kind, size int) {
		r := rand.New(rand.NewPCG(uint64(size), uint64(len(k.name))))
		out = append(out, vector{fmt.Sprintf("%s-%s-%d", w.name, k.name, size), k.make(r, size), w})
	}
	for i, w := range writers() {
		for _, k := range kinds {
			for _, size := range smallSizes {
				if size == 0 && k.name != kinds[0].name {
					continue // empty is empty
				}
				add(w, k, size)
			}
		}
		add(w, kinds[i%len(kinds)], largeSizes[0])
		add(w, kinds[(i+3)%len(kinds)], largeSizes[1])
		if i%3 == 0 {
			add(w, kinds[(i/3+len(kinds)-1)%len(kinds)], largeSizes[2])
		}
	}
	return out
}

func random(r *rand.Rand, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func zeros(_ *rand.Rand, size int) []byte {
	return make([]byte, size)
}

func pattern(_ *rand.Rand, size int) []byte {
	return []byte(strings.Repeat("Ferry!", size/6+1)[:size])
}

var words = strings.Fields(`the a of and to in is it that for on with as was by at be this
	from or have an they which one you were all her she there would their we him been has
	when who will more no if out so said what up its about into than them can only other
	MySQL HTTP Envoy proxy filter shim query row column SELECT FROM WHERE session commit`)

func text(r *rand.Rand, size int) []byte {
	var b strings.Builder
	line := 0
	for b.Len() < size {
		w := words[r.IntN(len(words))]
		b.WriteString(w)
		line += len(w) + 1
		switch {
		case line > 70:
			b.WriteString(".\n")
			line = 0
		case r.IntN(12) == 0:
			b.WriteString(", ")
		default:
			b.WriteByte(' ')
		}
	}
	return []byte(b.String()[:size])
}

// records: fixed-length rows, each the previous one with a few bytes changed, so a
// match breaks on a changed byte and resumes at the same offset (a repeat).
func records(r *rand.Rand, size int) []byte {
	const width = 97
	b := make([]byte, 0, size+width)
	row := text(r, width)
	for len(b) < size {
		for range 1 + r.IntN(3) {
			row[r.IntN(width)] = byte('0' + r.IntN(10))
		}
		b = append(b, row...)
	}
	return b[:size]
}

// longmatch: random segments, then copies of segments from up to ~1 MiB back.
func longmatch(r *rand.Rand, size int) []byte {
	b := make([]byte, 0, size+(64<<10))
	for len(b) < size {
		n := 1<<10 + r.IntN(32<<10)
		if len(b) < 128<<10 || r.IntN(3) == 0 {
			b = append(b, random(r, n)...)
			continue
		}
		from := max(0, len(b)-r.IntN(1<<20)-n)
		from = min(from, len(b)-n)
		b = append(b, b[from:from+n]...)
		b[len(b)-1-r.IntN(n)] ^= 0x55
	}
	return b[:size]
}

// mixed: segments of every other kind, including random runs longer than 64 KiB
// (literals with 3-byte lengths inside a compressed block) and zero runs far longer
// than 64 KiB (repeats with 3-byte lengths).
func mixed(r *rand.Rand, size int) []byte {
	parts := []struct {
		make func(r *rand.Rand, size int) []byte
		n    int
	}{
		{text, 40 << 10}, {random, 80 << 10}, {zeros, 200 << 10},
		{records, 60 << 10}, {pattern, 20 << 10}, {longmatch, 120 << 10},
	}
	var b []byte
	for i := 0; len(b) < size; i++ {
		p := parts[i%len(parts)]
		b = append(b, p.make(r, p.n)...)
	}
	return b[:size]
}
