package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Media types. The compat variant uses the standard OCI ones; the oci variant the ones of the
// Wasm image specification (solo-io/wasm spec.md), which Istio and Envoy Gateway also read.
const (
	mtManifest     = "application/vnd.oci.image.manifest.v1+json"
	mtIndex        = "application/vnd.oci.image.index.v1+json"
	mtImageConfig  = "application/vnd.oci.image.config.v1+json"
	mtTarGzipLayer = "application/vnd.oci.image.layer.v1.tar+gzip"
	mtWasmConfig   = "application/vnd.module.wasm.config.v1+json"
	mtWasmLayer    = "application/vnd.module.wasm.content.layer.v1+wasm"

	pluginFileName = "plugin.wasm" // the file the compat fetchers look for in the layer
	moduleName     = "ferry_filter.wasm"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// image is one image held in memory: its manifest bytes and every blob it names.
type image struct {
	name     string
	manifest []byte
	blobs    map[string][]byte // digest -> content
	wasmSize int64             // size of the layer that carries the module
}

func (im *image) digest() string { return digestOf(im.manifest) }

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (im *image) add(mediaType string, b []byte, ann map[string]string) descriptor {
	d := digestOf(b)
	im.blobs[d] = b
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b)), Annotations: ann}
}

func (im *image) seal(m manifest) error {
	b, err := json.Marshal(m) // struct fields in order, map keys sorted: deterministic
	if err != nil {
		return err
	}
	im.manifest = b
	return nil
}

// epoch is the one timestamp written into the images: SOURCE_DATE_EPOCH if set, else 1970-01-01.
func epoch() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// compatImage: one tar+gzip layer holding plugin.wasm, a standard OCI image config, and the
// annotation module.wasm.image/variant=compat (solo-io/wasm spec-compat.md).
func compatImage(wasm []byte) (*image, error) {
	t := epoch()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     pluginFileName,
		Size:     int64(len(wasm)),
		Mode:     0o644,
		ModTime:  t,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(wasm); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gzBuf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gzBuf, gzip.BestCompression) // header: no name, mtime 0
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}

	created := t.Format(time.RFC3339)
	cfg, err := json.Marshal(struct {
		Created      string   `json:"created"`
		Architecture string   `json:"architecture"`
		OS           string   `json:"os"`
		Config       struct{} `json:"config"`
		RootFS       struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
		History []map[string]string `json:"history"`
	}{
		Created: created, Architecture: "wasm", OS: "wasip1",
		RootFS: struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		}{"layers", []string{digestOf(tarBuf.Bytes())}},
		History: []map[string]string{{"created": created, "created_by": "ferry-oci build (deploy/oci)"}},
	})
	if err != nil {
		return nil, err
	}

	im := &image{name: "compat", blobs: map[string][]byte{}, wasmSize: int64(gzBuf.Len())}
	m := manifest{
		SchemaVersion: 2,
		MediaType:     mtManifest,
		Config:        im.add(mtImageConfig, cfg, nil),
		Layers:        []descriptor{im.add(mtTarGzipLayer, gzBuf.Bytes(), nil)},
		Annotations:   map[string]string{"module.wasm.image/variant": "compat"},
	}
	return im, im.seal(m)
}

// ociImage: the Wasm image specification's oci variant as its reference tool (wasme) pushes it
// and as Istio's and Envoy Gateway's fetchers require it: exactly two layers, the runtime config
// (application/vnd.module.wasm.config.v1+json, also the manifest's config) and the raw module
// (application/vnd.module.wasm.content.layer.v1+wasm). A one-layer image is rejected by both.
func ociImage(wasm []byte, wasmOnly bool) (*image, error) {
	runtimeCfg, err := json.Marshal(struct {
		Type        string              `json:"type"`
		AbiVersions []string            `json:"abiVersions"`
		Config      map[string][]string `json:"config"`
	}{"envoy_proxy", []string{"proxy_abi_version_0_2_1"}, map[string][]string{"root_ids": {"ferry"}}})
	if err != nil {
		return nil, err
	}
	im := &image{name: "oci", blobs: map[string][]byte{}, wasmSize: int64(len(wasm))}
	cfg := im.add(mtWasmConfig, runtimeCfg, map[string]string{"org.opencontainers.image.title": "runtime-config.json"})
	code := im.add(mtWasmLayer, wasm, map[string]string{"org.opencontainers.image.title": moduleName})
	layers := []descriptor{cfg, code}
	if wasmOnly { // only for the negative check in roundtrip
		layers = []descriptor{code}
	}
	cfg.Annotations = nil
	m := manifest{
		SchemaVersion: 2,
		MediaType:     mtManifest,
		Config:        cfg,
		Layers:        layers,
		Annotations: map[string]string{
			"module.wasm.runtime/type":        "envoy_proxy",
			"module.wasm.runtime/abi_version": "proxy_abi_version_0_2_1",
		},
	}
	return im, im.seal(m)
}

// writeLayout writes im as an OCI image layout at dir, replacing whatever was there.
func writeLayout(im *image, dir string) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	blobDir := filepath.Join(tmp, "blobs", "sha256")
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return err
	}
	write := func(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
	for d, b := range im.blobs {
		if err := write(filepath.Join(blobDir, d[len("sha256:"):]), b); err != nil {
			return err
		}
	}
	if err := write(filepath.Join(blobDir, im.digest()[len("sha256:"):]), im.manifest); err != nil {
		return err
	}
	index, _ := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{2, mtIndex, []descriptor{{
		MediaType: mtManifest, Digest: im.digest(), Size: int64(len(im.manifest)),
		Annotations: map[string]string{"org.opencontainers.image.ref.name": im.name},
	}}})
	if err := write(filepath.Join(tmp, "index.json"), index); err != nil {
		return err
	}
	if err := write(filepath.Join(tmp, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

type variantResult struct {
	Name          string `json:"name"`
	Layout        string `json:"layout"`
	Digest        string `json:"digest"`
	ManifestSize  int    `json:"manifest_size"`
	WasmLayerSize int64  `json:"wasm_layer_size"`
}

type buildResult struct {
	Wasm       string        `json:"wasm"`
	WasmSHA256 string        `json:"wasm_sha256"`
	WasmSize   int           `json:"wasm_size"`
	Compat     variantResult `json:"compat"`
	OCI        variantResult `json:"oci"`
}

func readModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return nil, fmt.Errorf("%s is not a wasm module (no \\0asm magic)", path)
	}
	return b, nil
}

// buildAll writes DIR/compat and DIR/oci (OCI image layouts), DIR/ferry_filter.wasm.sha256,
// DIR/compat.digest, DIR/oci.digest and DIR/images.json.
func buildAll(wasmPath, out string) (*buildResult, error) {
	wasm, err := readModule(wasmPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	res := &buildResult{Wasm: wasmPath, WasmSHA256: hex.EncodeToString(sum[:]), WasmSize: len(wasm)}

	compat, err := compatImage(wasm)
	if err != nil {
		return nil, err
	}
	oci, err := ociImage(wasm, false)
	if err != nil {
		return nil, err
	}
	for _, x := range []struct {
		im *image
		r  *variantResult
	}{{compat, &res.Compat}, {oci, &res.OCI}} {
		dir := filepath.Join(out, x.im.name)
		if err := writeLayout(x.im, dir); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(out, x.im.name+".digest"), []byte(x.im.digest()+"\n"), 0o644); err != nil {
			return nil, err
		}
		*x.r = variantResult{Name: x.im.name, Layout: dir, Digest: x.im.digest(),
			ManifestSize: len(x.im.manifest), WasmLayerSize: x.im.wasmSize}
	}
	if err := os.WriteFile(filepath.Join(out, moduleName+".sha256"), []byte(res.WasmSHA256+"\n"), 0o644); err != nil {
		return nil, err
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	return res, os.WriteFile(filepath.Join(out, "images.json"), append(js, '\n'), 0o644)
}
