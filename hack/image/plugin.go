package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// plugin is the kubectl plugin: built for the same platforms as the
// images, but shipped as krew archives, not as an image.
var plugin = component{name: "kubectl-courier", pkg: "./cmd/kubectl-courier"}

// buildPlugin builds kubectl-courier for each platform into
// <bins>/<os>_<arch>/, packs each into <out>/kubectl-courier_<os>_<arch>.tar.gz
// (fixed mode and mtime, so the same commit gives the same bytes), and
// fills artifacts/krew/courier.yaml into <out>/kubectl-courier.krew.yaml
// with the version, the archives and their sha256.
func buildPlugin(ctx context.Context, root, bins, out, ldflags, version, uriBase string, platforms []v1.Platform, mtime time.Time) error {
	values := map[string]string{"VERSION": version}
	for _, p := range platforms {
		data, err := buildChecked(ctx, root, plugin.pkg, p, ldflags, filepath.Join(bins, p.OS+"_"+p.Architecture, plugin.name))
		if err != nil {
			return err
		}
		archive, err := pluginArchive(data, mtime)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%s_%s_%s.tar.gz", plugin.name, p.OS, p.Architecture)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name), archive, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(archive)
		key := p.OS + "_" + p.Architecture
		values["SHA256_"+key] = hex.EncodeToString(sum[:])
		values["URI_"+key] = strings.TrimSuffix(uriBase, "/") + "/" + name
		fmt.Printf("%s sha256:%s\n", filepath.Join(out, name), values["SHA256_"+key])
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "artifacts", "krew", "courier.yaml"))
	if err != nil {
		return err
	}
	manifest, err := fillManifest(string(tmpl), values)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, plugin.name+".krew.yaml"), []byte(manifest), 0o644)
}

var placeholder = regexp.MustCompile(`\{\{([A-Za-z0-9_]+)\}\}`)

// fillManifest replaces each {{KEY}} of the manifest; a key without a
// value (a platform not built) is an error, never an empty field.
func fillManifest(tmpl string, values map[string]string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		k := placeholder.FindStringSubmatch(m)[1]
		v, ok := values[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("artifacts/krew/courier.yaml: no value for %s (is every platform it names built?)", strings.Join(missing, ", "))
	}
	return out, nil
}

// pluginArchive is a tar.gz holding the binary alone, as krew expects.
func pluginArchive(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: plugin.name, Mode: 0o755, Size: int64(len(bin)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
