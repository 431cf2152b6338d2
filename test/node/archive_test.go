package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ociArchive is an OCI image layout read from a tar file (what `make
// image` writes): every entry by name.
type ociArchive struct {
	path  string
	files map[string][]byte
}

func readArchive(path string) (*ociArchive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &ociArchive{path: path, files: map[string][]byte{}}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, hdr.Name, err)
		}
		a.files[strings.TrimPrefix(hdr.Name, "./")] = data
	}
}

func (a *ociArchive) blob(digest string) ([]byte, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("%s: digest %q is not sha256", a.path, digest)
	}
	data, ok := a.files["blobs/sha256/"+hex]
	if !ok {
		return nil, fmt.Errorf("%s: no blob %s", a.path, digest)
	}
	return data, nil
}

func (a *ociArchive) json(digest string, v any) error {
	data, err := a.blob(digest)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// top is index.json's one entry: the image index, named by its
// org.opencontainers.image.ref.name annotation.
func (a *ociArchive) top() (descriptor, error) {
	var idx index
	if err := json.Unmarshal(a.files["index.json"], &idx); err != nil {
		return descriptor{}, fmt.Errorf("%s: index.json: %w", a.path, err)
	}
	if len(idx.Manifests) != 1 {
		return descriptor{}, fmt.Errorf("%s: index.json has %d entries, want 1", a.path, len(idx.Manifests))
	}
	d := idx.Manifests[0]
	if d.Annotations[refNameKey] == "" {
		return descriptor{}, fmt.Errorf("%s: index.json's entry has no %s", a.path, refNameKey)
	}
	return d, nil
}

// ref is the image's name, as `ctr images import` names it.
func (a *ociArchive) ref() (string, error) {
	d, err := a.top()
	return d.Annotations[refNameKey], err
}

// image is the manifest and config of the image for linux/arch.
func (a *ociArchive) image(arch string) (manifest, imageConfig, error) {
	var m manifest
	var cfg imageConfig
	top, err := a.top()
	if err != nil {
		return m, cfg, err
	}
	var idx index
	if err := a.json(top.Digest, &idx); err != nil {
		return m, cfg, err
	}
	for _, d := range idx.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			continue
		}
		if err := a.json(d.Digest, &m); err != nil {
			return m, cfg, err
		}
		if err := a.json(m.Config.Digest, &cfg); err != nil {
			return m, cfg, err
		}
		if cfg.Architecture != arch || cfg.OS != "linux" {
			return m, cfg, fmt.Errorf("%s: the linux/%s manifest's config says %s/%s", a.path, arch, cfg.OS, cfg.Architecture)
		}
		return m, cfg, nil
	}
	return m, cfg, fmt.Errorf("%s: no linux/%s image in the index", a.path, arch)
}

// file is the content of the regular file name (no leading slash) in the
// linux/arch image's layers, the last layer holding it winning.
func (a *ociArchive) file(arch, name string) ([]byte, error) {
	m, _, err := a.image(arch)
	if err != nil {
		return nil, err
	}
	var found []byte
	for _, l := range m.Layers {
		blob, err := a.blob(l.Digest)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", a.path, l.Digest, err)
		}
		tr := tar.NewReader(zr)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", a.path, l.Digest, err)
			}
			if strings.TrimPrefix(hdr.Name, "./") == name && hdr.Typeflag == tar.TypeReg {
				if found, err = io.ReadAll(tr); err != nil {
					return nil, err
				}
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%s: no %s in the linux/%s image", a.path, name, arch)
	}
	return found, nil
}
