package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// loopbackOnlyHTTP refuses plain HTTP to anything but a loopback host. go-containerregistry
// falls back to HTTP by itself for localhost, loopback, *.local and RFC 1918 addresses; this
// keeps the fallback for loopback only, so a registry elsewhere is reached over TLS or not at all.
type loopbackOnlyHTTP struct{ next http.RoundTripper }

func (t loopbackOnlyHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("refusing plain HTTP to %s: only loopback registries may be reached without TLS", req.URL.Host)
	}
	return t.next.RoundTrip(req)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func transport() http.RoundTripper { return loopbackOnlyHTTP{remote.DefaultTransport} }

// keychainAuth: credentials from the Docker config (~/.docker/config.json, DOCKER_CONFIG),
// as written by `docker login`, `crane auth login`, `podman login --authfile` and the like.
func keychainAuth() remote.Option { return remote.WithAuthFromKeychain(authn.DefaultKeychain) }

// pushLayout pushes the single image of an OCI image layout to ref and returns its digest.
// dir is either a layout (it has an oci-layout file) or a build output directory, then the
// variant's layout under it is used.
func pushLayout(dir, variant, ref string, auth remote.Option) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		if variant != "compat" && variant != "oci" {
			return "", fmt.Errorf("--variant must be compat or oci, not %q", variant)
		}
		dir = filepath.Join(dir, variant)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("reading layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(im.Manifests) != 1 {
		return "", fmt.Errorf("layout %s holds %d images, want 1", dir, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	dst, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("parsing --ref: %w", err)
	}
	if err := remote.Write(dst, img, auth, remote.WithTransport(transport()), remote.WithContext(context.Background())); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return im.Manifests[0].Digest.String(), nil
}
