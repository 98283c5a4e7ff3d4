package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// maxModule bounds what a fetch reads (Envoy Gateway caps modules at 256 MiB as well).
const maxModule = 256 << 20

// fetched is what a pull yields: the module, the manifest digest and the rule that matched.
type fetched struct {
	module []byte
	digest string
	kind   string // "docker", "compat" or "oci"
	img    v1.Image
}

// fetchModule pulls ref and takes the module out of it by the rules Istio's and Envoy
// Gateway's image fetchers (istio/istio pkg/wasm/imagefetcher.go, envoyproxy/gateway
// internal/wasm/imagefetcher.go) apply, in their order:
//   - a Docker schema 2 manifest: the last layer must be application/vnd.docker.image.rootfs.diff.tar.gzip,
//     a gzipped tar whose entry with base name plugin.wasm is the module;
//   - otherwise the compat variant: exactly one layer, application/vnd.oci.image.layer.v1.tar+gzip,
//     plugin.wasm taken out of it the same way;
//   - otherwise the oci variant: exactly two layers, one of them
//     application/vnd.module.wasm.content.layer.v1+wasm whose blob, as stored, is the module.
//
// It pulls anonymously (as Envoy Gateway does without a pull secret) and, like both, retries
// with plain HTTP when the registry answers HTTPS with HTTP (the transport still allows that
// for loopback only).
func fetchModule(ctx context.Context, ref string) (*fetched, error) {
	opts := []remote.Option{remote.WithAuth(authn.Anonymous), remote.WithContext(ctx), remote.WithTransport(transport())}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(r, opts...)
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response") {
		if r, err = name.ParseReference(ref, name.Insecure); err == nil {
			desc, err = remote.Get(r, opts...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := &fetched{digest: d.String(), img: img}

	if m.MediaType == types.DockerManifestSchema2 {
		out.kind = "docker"
		out.module, err = moduleFromTarGz(layers, types.DockerLayer, false)
		return out, err
	}
	mod, errCompat := moduleFromTarGz(layers, types.OCILayer, true)
	if errCompat == nil {
		out.kind, out.module = "compat", mod
		return out, nil
	}
	mod, errOCI := moduleFromWasmLayer(layers)
	if errOCI == nil {
		out.kind, out.module = "oci", mod
		return out, nil
	}
	return nil, fmt.Errorf("not a Wasm image: compat: %v; oci: %v", errCompat, errOCI)
}

func moduleFromTarGz(layers []v1.Layer, want types.MediaType, single bool) ([]byte, error) {
	if len(layers) == 0 || (single && len(layers) != 1) {
		return nil, fmt.Errorf("want 1 layer, image has %d", len(layers))
	}
	l := layers[len(layers)-1]
	mt, err := l.MediaType()
	if err != nil {
		return nil, err
	}
	if mt != want {
		return nil, fmt.Errorf("layer media type %s, want %s", mt, want)
	}
	rc, err := l.Compressed() // the blob as stored: gzip
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		return nil, fmt.Errorf("layer is not gzip: %w", err)
	}
	tr := tar.NewReader(io.LimitReader(zr, maxModule))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in the layer", pluginFileName)
		}
		if err != nil {
			return nil, err
		}
		if path.Base(h.Name) == pluginFileName {
			return io.ReadAll(tr)
		}
	}
}

func moduleFromWasmLayer(layers []v1.Layer) ([]byte, error) {
	if len(layers) != 2 {
		return nil, fmt.Errorf("want 2 layers, image has %d", len(layers))
	}
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		if mt != mtWasmLayer {
			continue
		}
		rc, err := l.Compressed() // stored uncompressed: the blob is the module itself
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(io.LimitReader(rc, maxModule))
	}
	return nil, fmt.Errorf("no %s layer", mtWasmLayer)
}
