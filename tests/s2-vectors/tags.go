package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// tagStats counts the chunk types and block tag forms in streams, to show the
// vectors exercise everything the Rust decoder must handle.
type tagStats map[string]int

// required: each must appear somewhere in the vectors. A literal with a 4-byte
// length needs a block over 16 MiB, so s2 never writes one (the Rust unit tests
// cover it).
var required = []string{
	"chunk:stream-identifier S2sTwO", "chunk:stream-identifier sNaPpY",
	"chunk:compressed", "chunk:uncompressed", "chunk:padding", "chunk:index",
	"literal", "literal 1-byte length", "literal 2-byte length", "literal 3-byte length",
	"copy 1-byte offset", "copy 2-byte offset", "copy 4-byte offset",
	"repeat", "repeat 1-byte length", "repeat 2-byte length", "repeat 3-byte length",
}

func (s *tagStats) add(what string) {
	if *s == nil {
		*s = tagStats{}
	}
	(*s)[what]++
}

func (s *tagStats) walk(stream []byte) error {
	for len(stream) > 0 {
		if len(stream) < 4 {
			return errors.New("truncated chunk header")
		}
		kind := stream[0]
		n := int(stream[1]) | int(stream[2])<<8 | int(stream[3])<<16
		if len(stream) < 4+n {
			return errors.New("truncated chunk")
		}
		body := stream[4 : 4+n]
		stream = stream[4+n:]
		switch {
		case kind == 0xff:
			s.add("chunk:stream-identifier " + string(body))
		case kind == 0x00:
			s.add("chunk:compressed")
			if err := s.block(body[4:]); err != nil {
				return err
			}
		case kind == 0x01:
			s.add("chunk:uncompressed")
		case kind == 0xfe:
			s.add("chunk:padding")
		case kind == 0x99:
			s.add("chunk:index")
		default:
			s.add(fmt.Sprintf("chunk:%#02x", kind))
		}
	}
	return nil
}

// block classifies each tag of an S2 block (the format is in compress/src/s2/block.rs).
func (s *tagStats) block(b []byte) error {
	_, n := binary.Uvarint(b)
	if n <= 0 {
		return errors.New("bad block length")
	}
	b = b[n:]
	for len(b) > 0 {
		tag := b[0]
		var size int
		switch tag & 3 {
		case 0:
			x := int(tag >> 2)
			extra := max(0, x-59)
			if len(b) < 1+extra {
				return errors.New("truncated literal")
			}
			lit := x + 1
			if extra > 0 {
				s.add(fmt.Sprintf("literal %d-byte length", extra))
				var le [8]byte
				copy(le[:], b[1:1+extra])
				lit = int(binary.LittleEndian.Uint64(le[:])) + 1
			} else {
				s.add("literal")
			}
			size = 1 + extra + lit
		case 1:
			if len(b) < 2 {
				return errors.New("truncated copy")
			}
			size = 2
			if tag&0xe0 == 0 && b[1] == 0 {
				code := int(tag>>2) & 7
				if code >= 5 {
					s.add(fmt.Sprintf("repeat %d-byte length", code-4))
					size += code - 4
				} else {
					s.add("repeat")
				}
			} else {
				s.add("copy 1-byte offset")
			}
		case 2:
			s.add("copy 2-byte offset")
			size = 3
		case 3:
			s.add("copy 4-byte offset")
			size = 5
		}
		if len(b) < size {
			return errors.New("truncated tag")
		}
		b = b[size:]
	}
	return nil
}

func (s tagStats) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-32s %d\n", k, s[k])
	}
	return b.String()
}

func (s tagStats) complete() error {
	var missing []string
	for _, k := range required {
		if s[k] == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no vector exercises: %s", strings.Join(missing, ", "))
	}
	return nil
}
