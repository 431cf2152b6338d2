package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"
)

// OCI media types and the annotation `ctr images import` names an image by.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	refNameKey    = "org.opencontainers.image.ref.name"
)

// descriptor, manifest, index and imageConfig are the parts of the OCI
// image spec the suite writes and reads.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// buildPauseImage builds hack/node/pause as a static binary for this
// machine and writes it as a one-layer OCI image archive named pauseRef
// (what `ctr images import` takes). It runs as 65535, as Kubernetes' pause
// does.
func buildPauseImage(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=",
		"-o", bin, "./hack/node/pause")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause program: %w: %s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "pause.oci.tar")
	return archive, writePauseArchive(archive, data)
}

// writePauseArchive writes the OCI image layout (oci-layout, index.json,
// blobs/sha256/...) of an image holding bin as /pause, as a tar file.
func writePauseArchive(path string, bin []byte) error {
	mtime := time.Unix(0, 0).UTC()
	layer, err := tarOf(map[string][]byte{"pause": bin}, mtime, 0o755)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	blobs := map[string][]byte{}
	add := func(mediaType string, data []byte) descriptor {
		sum := sha256.Sum256(data)
		blobs[hex.EncodeToString(sum[:])] = data
		return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	}
	var cfg imageConfig
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.User = "65535:65535"
	cfg.Config.Entrypoint = []string{"/pause"}
	cfg.RootFS.Type = "layers"
	diffID := sha256.Sum256(layer)
	cfg.RootFS.DiffIDs = []string{"sha256:" + hex.EncodeToString(diffID[:])}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	m := manifest{SchemaVersion: 2, MediaType: mediaManifest,
		Config: add(mediaConfig, cfgJSON), Layers: []descriptor{add(mediaLayerGz, gz.Bytes())}}
	mJSON, err := json.Marshal(m)
	if err != nil {
		return err
	}
	md := add(mediaManifest, mJSON)
	md.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	md.Annotations = map[string]string{refNameKey: pauseRef}
	idxJSON, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{md}})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": idxJSON,
	}
	for h, data := range blobs {
		files["blobs/sha256/"+h] = data
	}
	out, err := tarOf(files, mtime, 0o644)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// tarOf is a tar of files (sorted, owned by 0:0, all with mode and mtime),
// with the directories their names need.
func tarOf(files map[string][]byte, mtime time.Time, mode int64) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	written := map[string]bool{}
	for _, n := range names {
		var parents []string
		for d := filepath.Dir(n); d != "." && !written[d]; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
			written[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: mode,
			Size: int64(len(files[n])), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
