package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"time"
)

// writeOCIArchive writes an OCI image layout archive (what `ctr images
// import` reads) of a one-layer image on an empty base: bin as /entry, the
// entrypoint, run as user ("uid:gid"), named name. No base image, nothing
// from outside.
func writeOCIArchive(bin, entry, name, user, out string) error {
	exe, err := os.ReadFile(bin) //nolint:gosec // a binary the harness built
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"etc", "tmp", "var"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: entry, Mode: 0o755, Size: int64(len(exe)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(exe); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	digest := func(b []byte) string { h := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(h[:]) }
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Platform    map[string]string `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "created": "1970-01-01T00:00:00Z",
		"config": map[string]any{"Entrypoint": []string{"/" + entry}, "Env": []string{"PATH=/"}, "User": user},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer.Bytes())}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers": []desc{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: digest(gz.Bytes()), Size: gz.Len()}},
	})
	tag := name[strings.LastIndex(name, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []desc{{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: len(manifest),
			Platform:    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			Annotations: map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}}},
	})
	f, err := os.Create(out) //nolint:gosec // the harness's own file
	if err != nil {
		return err
	}
	ow := tar.NewWriter(f)
	add := func(n string, b []byte) error {
		if err := ow.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := ow.Write(b)
		return err
	}
	for _, e := range []struct {
		n string
		b []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index},
		{"blobs/sha256/" + digest(config)[7:], config}, {"blobs/sha256/" + digest(manifest)[7:], manifest}, {"blobs/sha256/" + digest(gz.Bytes())[7:], gz.Bytes()},
	} {
		if err := add(e.n, e.b); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := ow.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
