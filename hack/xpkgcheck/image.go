package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// image is one package image: its config and the union of its layers'
// files.
type image struct {
	rawConfig []byte
	config    imageConfig
	contents  map[string][]byte
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

func (i image) platform() string { return i.config.OS + "/" + i.config.Architecture }

// readTarball reads a package file: a tarball with a manifest.json, the
// image config and gzipped layers, as `crossplane xpkg build` writes it.
func readTarball(path string) (image, error) {
	f, err := os.Open(path) //nolint:gosec // the build's own output
	if err != nil {
		return image{}, err
	}
	defer f.Close() //nolint:errcheck // read-only
	files, err := readTar(f)
	if err != nil {
		return image{}, fmt.Errorf("%s: %w", path, err)
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		return image{}, fmt.Errorf("%s: manifest.json: %w", path, err)
	}
	if len(manifest) != 1 {
		return image{}, fmt.Errorf("%s: manifest.json describes %d images, not one", path, len(manifest))
	}
	layers := make([][]byte, 0, len(manifest[0].Layers))
	for _, l := range manifest[0].Layers {
		layers = append(layers, files[l])
	}
	img, err := assemble(files[manifest[0].Config], layers)
	if err != nil {
		return image{}, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

// readLayout reads an OCI image layout whose index.json leads (directly or
// through one nested index) to one image per platform, keyed "os/arch".
func readLayout(dir string) (map[string]image, error) {
	top, err := os.ReadFile(filepath.Join(dir, "index.json")) //nolint:gosec // the build's own output
	if err != nil {
		return nil, err
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(top, &index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(index.Manifests) == 1 && strings.HasSuffix(index.Manifests[0].MediaType, "image.index.v1+json") {
		b, err := blob(dir, index.Manifests[0].Digest)
		if err != nil {
			return nil, err
		}
		index.Manifests = nil
		if err := json.Unmarshal(b, &index); err != nil {
			return nil, fmt.Errorf("nested index: %w", err)
		}
	}
	out := map[string]image{}
	for _, d := range index.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("index entry %s has no platform", d.Digest)
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("the index lists %s twice", p)
		}
		b, err := blob(dir, d.Digest)
		if err != nil {
			return nil, err
		}
		var m struct {
			Config struct{ Digest string }
			Layers []struct{ Digest string }
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("manifest of %s: %w", p, err)
		}
		config, err := blob(dir, m.Config.Digest)
		if err != nil {
			return nil, err
		}
		var layers [][]byte
		for _, l := range m.Layers {
			lb, err := blob(dir, l.Digest)
			if err != nil {
				return nil, err
			}
			layers = append(layers, lb)
		}
		if out[p], err = assemble(config, layers); err != nil {
			return nil, fmt.Errorf("image of %s: %w", p, err)
		}
	}
	return out, nil
}

func blob(dir, digest string) ([]byte, error) {
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok || strings.ContainsAny(hex, "/.") || alg != "sha256" {
		return nil, fmt.Errorf("bad digest %q", digest)
	}
	return os.ReadFile(filepath.Join(dir, "blobs", alg, hex)) //nolint:gosec // digest checked above
}

func assemble(config []byte, layers [][]byte) (image, error) {
	img := image{rawConfig: config, contents: map[string][]byte{}}
	if err := json.Unmarshal(config, &img.config); err != nil {
		return image{}, fmt.Errorf("image config: %w", err)
	}
	for i, l := range layers {
		z, err := gzip.NewReader(bytes.NewReader(l))
		if err != nil {
			return image{}, fmt.Errorf("layer %d: %w", i, err)
		}
		files, err := readTar(z)
		if err != nil {
			return image{}, fmt.Errorf("layer %d: %w", i, err)
		}
		for k, v := range files {
			img.contents[k] = v
		}
	}
	return img, nil
}

func readTar(r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")] = b
	}
}
