// Command ferry-oci packages the Ferry proxy-wasm filter as OCI images that Istio's
// WasmPlugin and Envoy Gateway's EnvoyExtensionPolicy can pull, without a Docker engine.
//
//	ferry-oci build     --wasm PATH --out DIR                 write both image layouts under DIR
//	ferry-oci push      --layout DIR --ref REF [--variant V]  push one layout to a registry
//	ferry-oci roundtrip --layout DIR --wasm PATH              loopback registry round trip (make oci-check)
//
// See docs/guides/oci-image.md.
package main

import (
	"flag"
	"fmt"
	"os"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  ferry-oci build     --wasm PATH --out DIR
  ferry-oci push      --layout DIR --ref HOST[:PORT]/REPO:TAG [--variant compat|oci]
  ferry-oci roundtrip --layout DIR --wasm PATH
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "build":
		wasm := fs.String("wasm", "", "path of the .wasm module")
		out := fs.String("out", "", "output directory (image layouts, .sha256, digests)")
		fs.Parse(os.Args[2:])
		if *wasm == "" || *out == "" {
			usage()
		}
		var res *buildResult
		if res, err = buildAll(*wasm, *out); err == nil {
			fmt.Printf("oci: module sha256=%s size=%d\n", res.WasmSHA256, res.WasmSize)
			for _, v := range []*variantResult{&res.Compat, &res.OCI} {
				fmt.Printf("oci: %-6s %s  %s (manifest %d B, wasm layer %d B)\n",
					v.Name, v.Digest, v.Layout, v.ManifestSize, v.WasmLayerSize)
			}
		}
	case "push":
		layoutDir := fs.String("layout", "", "image layout directory, or the build output directory")
		ref := fs.String("ref", "", "destination reference, e.g. registry.example.com/ferry/filter:0.1.0")
		variant := fs.String("variant", "compat", "compat or oci (when --layout is the build output directory)")
		fs.Parse(os.Args[2:])
		if *layoutDir == "" || *ref == "" {
			usage()
		}
		var digest string
		if digest, err = pushLayout(*layoutDir, *variant, *ref, keychainAuth()); err == nil {
			fmt.Printf("pushed %s@%s\n", *ref, digest)
		}
	case "roundtrip":
		layoutDir := fs.String("layout", "", "build output directory")
		wasm := fs.String("wasm", "", "path of the .wasm module the images were built from")
		fs.Parse(os.Args[2:])
		if *layoutDir == "" || *wasm == "" {
			usage()
		}
		err = roundtrip(*layoutDir, *wasm)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ferry-oci %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
