package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// verifyModule: the pulled module must hash to the published ferry_filter.wasm.sha256 (the
// check made for an http(s) source's sha256) and be the very bytes the images were built from.
func verifyModule(got, want []byte, wantSHA string) error {
	if h := sha256Hex(got); h != wantSHA {
		return fmt.Errorf("sha256 %s, want %s", h, wantSHA)
	}
	if !bytes.Equal(got, want) {
		return errors.New("module bytes differ from the input")
	}
	return nil
}

// roundtrip starts a registry on 127.0.0.1 (random port, in process), pushes both layouts
// from dir, pulls them back with fetchModule and checks the module, its sha256 and the image
// digests (Istio and Envoy Gateway compare a WasmPlugin's or EnvoyExtensionPolicy's sha256 with
// the module's sha256 for http(s) URLs and with the image digest for OCI images). Two negative
// cases must fail the way they should: a module with one byte changed (caught by both
// comparisons) and a one-layer oci variant (rejected by the fetch rules).
func roundtrip(dir, wasmPath string) error {
	start := time.Now()
	wasm, err := readModule(wasmPath)
	if err != nil {
		return err
	}
	shaFile, err := os.ReadFile(filepath.Join(dir, moduleName+".sha256"))
	if err != nil {
		return err
	}
	wantSHA := strings.TrimSpace(string(shaFile))
	if h := sha256Hex(wasm); h != wantSHA {
		return fmt.Errorf("%s has sha256 %s but %s.sha256 says %s: run make oci", wasmPath, h, moduleName, wantSHA)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	host := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	anon := remote.WithAuth(authn.Anonymous)

	built, err := os.ReadFile(filepath.Join(dir, "images.json"))
	if err != nil {
		return err
	}
	var res buildResult
	if err := json.Unmarshal(built, &res); err != nil {
		return fmt.Errorf("images.json: %w", err)
	}
	var summary []string
	for _, r := range []variantResult{res.Compat, res.OCI} {
		v := r.Name
		want, err := os.ReadFile(filepath.Join(dir, v+".digest"))
		if err != nil {
			return err
		}
		wantDigest := strings.TrimSpace(string(want))
		if wantDigest != r.Digest {
			return fmt.Errorf("%s.digest says %s, images.json %s: run make oci", v, wantDigest, r.Digest)
		}
		ref := fmt.Sprintf("%s/ferry/filter:check-%s", host, v)
		pushed, err := pushLayout(dir, v, ref, anon)
		if err != nil {
			return err
		}
		f, err := fetchModule(ctx, ref)
		if err != nil {
			return fmt.Errorf("%s: pull: %w", v, err)
		}
		switch {
		case pushed != wantDigest:
			return fmt.Errorf("%s: pushed %s, layout says %s", v, pushed, wantDigest)
		case f.digest != wantDigest:
			return fmt.Errorf("%s: registry serves %s, layout says %s", v, f.digest, wantDigest)
		case f.kind != v:
			return fmt.Errorf("%s: the fetch rules read it as the %s variant", v, f.kind)
		}
		if err := verifyModule(f.module, wasm, wantSHA); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		if v == "compat" { // a standard image: config, diff_ids, digests and sizes must all agree
			if err := validate.Image(f.img); err != nil {
				return fmt.Errorf("compat: as pulled, not a valid image: %w", err)
			}
		}
		summary = append(summary, fmt.Sprintf("%s=%s (layer %d B)", v, wantDigest, r.WasmLayerSize))
	}

	// Negative 1: one byte of the module changed, packaged and pulled like the real one.
	tampered := bytes.Clone(wasm)
	tampered[len(tampered)/2] ^= 0x01
	timg, err := compatImage(tampered)
	if err != nil {
		return err
	}
	f, err := pushAndFetch(ctx, timg, host, "check-tampered", anon)
	if err != nil {
		return fmt.Errorf("tampered: %w", err)
	}
	if verifyModule(f.module, wasm, wantSHA) == nil {
		return errors.New("tampered module passed the module sha256 check")
	}
	if f.digest == res.Compat.Digest { // what sha256 is compared with for oci:// URLs
		return errors.New("tampered module gave the same image digest")
	}

	// Negative 2: an oci variant with the module layer only is not accepted by the fetch rules.
	one, err := ociImage(wasm, true)
	if err != nil {
		return err
	}
	if f, err := pushAndFetch(ctx, one, host, "check-one-layer", anon); err == nil {
		return fmt.Errorf("one-layer oci variant was accepted (as %s)", f.kind)
	} else if !strings.Contains(err.Error(), "want 2 layers") {
		return fmt.Errorf("one-layer oci variant: failed for another reason: %w", err)
	}

	fmt.Printf("oci-check: OK wasm sha256=%s (%d B) %s via %s; tampered module caught (module sha256 and image digest), one-layer oci variant rejected; %.2fs\n",
		wantSHA, len(wasm), strings.Join(summary, " "), host, time.Since(start).Seconds())
	return nil
}

func pushAndFetch(ctx context.Context, im *image, host, tag string, auth remote.Option) (*fetched, error) {
	tmp, err := os.MkdirTemp("", "ferry-oci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, im.name)
	if err := writeLayout(im, dir); err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("%s/ferry/filter:%s", host, tag)
	if _, err := pushLayout(dir, "", ref, auth); err != nil {
		return nil, err
	}
	return fetchModule(ctx, ref)
}
