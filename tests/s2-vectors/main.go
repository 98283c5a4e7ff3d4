// Command s2-vectors checks Ferry's S2 codec (compress/src/s2) against the reference
// implementation, klauspost/compress's s2 package.
//
//	gen DIR     writes NAME.raw and NAME.s2 (s2.Writer's stream of it) for every writer
//	            option set and input, and fails unless the streams use every chunk type
//	            and block tag form the decoder must handle.
//	verify DIR  decodes every NAME.rust.s2 (written by compress/tests/s2_reference.rs)
//	            with s2.Reader and compares it with NAME.raw.
//
// `make s2-vectors` runs gen, the Rust test, then verify.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/s2"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "gen" && os.Args[1] != "verify") {
		fmt.Fprintln(os.Stderr, "usage: s2-vectors gen|verify DIR")
		os.Exit(2)
	}
	var err error
	if os.Args[1] == "gen" {
		err = gen(os.Args[2])
	} else {
		err = verify(os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "s2-vectors:", err)
		os.Exit(1)
	}
}

func gen(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Stale vectors (and Rust streams of them) would be checked against new ones.
	for _, pattern := range []string{"*.raw", "*.s2"} {
		old, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	var stats tagStats
	n := 0
	for _, v := range vectors() {
		stream, err := v.writer.encode(v.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		// Our own round trip first: a vector s2 cannot read back is no reference.
		back, err := io.ReadAll(s2.NewReader(bytes.NewReader(stream)))
		if err != nil && len(v.raw) == 0 {
			// WriterAddIndex on empty input writes an index chunk with no stream
			// identifier before it, which s2.Reader (like ours) rejects.
			fmt.Printf("s2-vectors: skipped %s: s2.Reader rejects it (%v)\n", v.name, err)
			continue
		}
		if err != nil || !bytes.Equal(back, v.raw) {
			return fmt.Errorf("%s: s2 does not read back its own stream (%v)", v.name, err)
		}
		if err := stats.walk(stream); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		base := filepath.Join(dir, v.name)
		if err := os.WriteFile(base+".raw", v.raw, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(base+".s2", stream, 0o644); err != nil {
			return err
		}
		n++
	}
	fmt.Printf("s2-vectors: wrote %d vectors to %s\n%s", n, dir, stats)
	return stats.complete()
}

func verify(dir string) error {
	raws, _ := filepath.Glob(filepath.Join(dir, "*.raw"))
	if len(raws) == 0 {
		return fmt.Errorf("no vectors in %s: run make s2-vectors", dir)
	}
	sort.Strings(raws)
	var failed []string
	for _, rawPath := range raws {
		name := strings.TrimSuffix(filepath.Base(rawPath), ".raw")
		raw, err := os.ReadFile(rawPath)
		if err != nil {
			return err
		}
		stream, err := os.ReadFile(filepath.Join(dir, name+".rust.s2"))
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: no Rust stream (%v)", name, err))
			continue
		}
		got, err := io.ReadAll(s2.NewReader(bytes.NewReader(stream)))
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
		case !bytes.Equal(got, raw):
			failed = append(failed, fmt.Sprintf("%s: decoded %d bytes, want %d (or content differs)", name, len(got), len(raw)))
		}
	}
	for _, f := range failed {
		fmt.Fprintln(os.Stderr, "FAIL", f)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d Rust streams failed", len(failed), len(raws))
	}
	fmt.Printf("s2-vectors: s2.Reader decoded all %d Rust streams in %s\n", len(raws), dir)
	return nil
}
