package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The tests build a tiny stand-in program with buildBinary, the function
// `make image` builds Courier's binaries with, once per platform, and put
// it in images of both components; building Courier itself for arm64 would
// take minutes.

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	plats = []v1.Platform{amd64, arm64}
)

var testMetadata = metadata{
	version:  "v0.1.0-alpha.0+abc1234",
	revision: "0123456789abcdef0123456789abcdef01234567",
	source:   "https://github.com/courier-dev/courier",
	created:  time.Unix(1767225600, 0).UTC(),
}

var standins struct {
	once sync.Once
	dir  string
	bins map[string][]byte
	err  error
}

// standinBinaries builds the stand-in once for every platform.
func standinBinaries(t *testing.T) map[string][]byte {
	t.Helper()
	standins.once.Do(func() {
		standins.dir, standins.err = os.MkdirTemp("", "hack-image-test-")
		if standins.err != nil {
			return
		}
		standins.bins = map[string][]byte{}
		for _, p := range plats {
			out := filepath.Join(standins.dir, p.Architecture, "standin")
			if standins.err = buildBinary(context.Background(), ".", "./testdata/standin", p, "-X main.unused=1", out); standins.err != nil {
				return
			}
			if standins.bins[p.Architecture], standins.err = os.ReadFile(out); standins.err != nil {
				return
			}
		}
	})
	if standins.err != nil {
		t.Fatal(standins.err)
	}
	return standins.bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if standins.dir != "" {
		os.RemoveAll(standins.dir)
	}
	os.Exit(code)
}

func TestBinariesAreStaticAndReproducible(t *testing.T) {
	bins := standinBinaries(t)
	for _, p := range plats {
		// A second build from scratch (go build relinks) gives the same bytes.
		out := filepath.Join(t.TempDir(), "standin")
		if err := buildBinary(context.Background(), ".", "./testdata/standin", p, "-X main.unused=1", out); err != nil {
			t.Fatal(err)
		}
		again, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, bins[p.Architecture]) {
			t.Errorf("%s: two builds differ", p.Architecture)
		}
		if err := checkBinary(bins[p.Architecture], p); err != nil {
			t.Errorf("%s: %v", p.Architecture, err)
		}
	}
	// The checks fail on the wrong architecture...
	if err := checkBinary(bins["amd64"], arm64); err == nil || !strings.Contains(err.Error(), "EM_X86_64") {
		t.Errorf("amd64 binary accepted for arm64: %v", err)
	}
	if err := checkBinary(bins["arm64"], amd64); err == nil || !strings.Contains(err.Error(), "EM_AARCH64") {
		t.Errorf("arm64 binary accepted for amd64: %v", err)
	}
	// ...on something that is not ELF...
	if err := checkBinary([]byte("#!/bin/sh\n"), amd64); err == nil {
		t.Error("a script accepted as a binary")
	}
	// ...and on a dynamically linked binary (the host's shell).
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if _, ok := elfMachines[runtime.GOARCH]; !ok || runtime.GOOS != "linux" {
		t.Skip("no dynamic binary of a known architecture on this host")
	}
	for _, candidate := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		data, err := os.ReadFile(candidate)
		if err != nil {
			continue
		}
		if f, err := elf.NewFile(bytes.NewReader(data)); err != nil || !hasInterp(f) {
			continue
		}
		if err := checkBinary(data, host); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("%s accepted as static: %v", candidate, err)
		}
		return
	}
	t.Log("no dynamically linked binary found on this host to check against")
}

func hasInterp(f *elf.File) bool {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// TestImages builds each component's index twice from the same inputs:
// the same digests and the same archive bytes; then checks the archive.
func TestImages(t *testing.T) {
	bins := standinBinaries(t)
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			ref := "ghcr.io/courier-dev/" + c.repository + ":v0.1.0-alpha.0_abc1234"
			var digests []v1.Hash
			var archives, sums []string
			for range 2 {
				idx, err := buildIndex(c, plats, bins, testMetadata)
				if err != nil {
					t.Fatal(err)
				}
				d, err := idx.Digest()
				if err != nil {
					t.Fatal(err)
				}
				archive := filepath.Join(t.TempDir(), c.name+".oci.tar")
				if err := writeArchive(archive, idx, ref, testMetadata.created); err != nil {
					t.Fatal(err)
				}
				digests = append(digests, d)
				archives = append(archives, archive)
				sums = append(sums, fileSHA256(t, archive))
			}
			if digests[0] != digests[1] {
				t.Errorf("index digests differ: %s, %s", digests[0], digests[1])
			}
			if sums[0] != sums[1] {
				t.Errorf("archives differ: sha256 %s, %s", sums[0], sums[1])
			}
			want := expectation{component: c, md: testMetadata, ref: ref, platforms: plats, bins: bins}
			if err := checkArchive(archives[0], t.TempDir(), want); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestArchiveChecksFail breaks one thing at a time and expects the
// reproducibility comparison or checkArchive to notice: each of the
// assertions above can fail.
func TestArchiveChecksFail(t *testing.T) {
	bins := standinBinaries(t)
	c := components[0]
	want := expectation{component: c, md: testMetadata, ref: "example.com/courier:test", platforms: plats, bins: bins}
	image := func(p v1.Platform, md metadata, o imageOptions) v1.Image {
		t.Helper()
		img, err := buildImageWith(c, p, md, o)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	good := func(p v1.Platform) imageOptions {
		return imageOptions{user: user, files: rootFiles(c.name, bins[p.Architecture])}
	}
	goodAMD64, goodARM64 := image(amd64, testMetadata, good(amd64)), image(arm64, testMetadata, good(arm64))

	// Another commit time is another image.
	later := testMetadata
	later.created = later.created.Add(time.Second)
	d1, err := goodAMD64.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := image(amd64, later, good(amd64)).Digest(); err != nil || d1 == d2 {
		t.Errorf("another commit time gave digest %s (%v), the same as %s", d2, err, d1)
	}

	otherMD := testMetadata
	otherMD.revision = strings.Repeat("f", 40)
	root := good(arm64)
	root.user = "0:0"
	extra := good(arm64)
	extra.files = append(extra.files, file{name: "tmp/", mode: 0o1777})
	swapped := good(arm64)
	swapped.files = rootFiles(c.name, bins["amd64"])
	noCA := good(arm64)
	noCA.files = slices.DeleteFunc(slices.Clone(noCA.files), func(f file) bool { return f.name == caFile })
	withARM64 := func(img v1.Image) func() v1.ImageIndex {
		return func() v1.ImageIndex { return newIndex(c, testMetadata, plats, []v1.Image{goodAMD64, img}) }
	}

	cases := []struct {
		name    string
		idx     func() v1.ImageIndex
		ref     string
		corrupt bool
		errText string
	}{
		{name: "root user", idx: withARM64(image(arm64, testMetadata, root)), errText: "user"},
		{name: "other labels", idx: withARM64(image(arm64, otherMD, good(arm64))), errText: "labels"},
		{name: "extra path", idx: withARM64(image(arm64, testMetadata, extra)), errText: "layer"},
		{name: "no CA bundle", idx: withARM64(image(arm64, testMetadata, noCA)), errText: "layer"},
		{name: "amd64 binary in the arm64 image", idx: withARM64(image(arm64, testMetadata, swapped)), errText: "EM_X86_64"},
		{name: "one platform", idx: func() v1.ImageIndex {
			return newIndex(c, testMetadata, plats[:1], []v1.Image{goodAMD64})
		}, errText: "platforms"},
		{name: "index labels", idx: func() v1.ImageIndex {
			return newIndex(c, otherMD, plats, []v1.Image{goodAMD64, goodARM64})
		}, errText: "annotations"},
		{name: "ref name", ref: "example.com/other:test", errText: "ref.name"},
		{name: "corrupt blob", corrupt: true, errText: "hash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			idx := newIndex(c, testMetadata, plats, []v1.Image{goodAMD64, goodARM64})
			if tc.idx != nil {
				idx = tc.idx()
			}
			ref := want.ref
			if tc.ref != "" {
				ref = tc.ref
			}
			archive := filepath.Join(t.TempDir(), "x.oci.tar")
			if err := writeArchive(archive, idx, ref, testMetadata.created); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := untar(archive, dir); err != nil {
				t.Fatal(err)
			}
			if tc.corrupt {
				corruptLargestBlob(t, dir)
			}
			err := checkLayout(dir, want)
			if err == nil {
				t.Fatalf("checks passed; want an error about %q", tc.errText)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("error %q does not mention %q", err, tc.errText)
			}
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	ps, err := parsePlatforms("linux/amd64, linux/arm64")
	if err != nil || !reflect.DeepEqual(ps, plats) {
		t.Errorf("parsePlatforms: %v, %v", ps, err)
	}
	for _, bad := range []string{"linux", "windows/amd64", "linux/riscv64"} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("parsePlatforms(%q) accepted", bad)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	md, err := gitMetadata(context.Background(), "../..")
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	if !md.created.Equal(time.Unix(1700000000, 0)) || len(md.revision) != 40 {
		t.Errorf("metadata %+v", md)
	}
}

// expectation is what an archive of component must hold.
type expectation struct {
	component component
	md        metadata
	ref       string
	platforms []v1.Platform
	bins      map[string][]byte // expected binary per architecture
}

func checkArchive(archive, dir string, want expectation) error {
	if err := untar(archive, dir); err != nil {
		return err
	}
	return checkLayout(dir, want)
}

// checkLayout checks an unpacked OCI layout blob by blob, then reads it
// with go-containerregistry's layout package and checks the images.
func checkLayout(dir string, want expectation) error {
	if err := checkBlobs(dir); err != nil {
		return err
	}
	var ociLayout struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	if err := readJSON(filepath.Join(dir, "oci-layout"), &ociLayout); err != nil {
		return err
	}
	if ociLayout.ImageLayoutVersion != "1.0.0" {
		return fmt.Errorf("oci-layout: version %q", ociLayout.ImageLayoutVersion)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		return fmt.Errorf("index.json: want one image index, got %+v", tm.Manifests)
	}
	if got := tm.Manifests[0].Annotations[refName]; got != want.ref {
		return fmt.Errorf("index.json: ref.name %q, want %q", got, want.ref)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	labels := want.md.labels(want.component.name)
	if !maps.Equal(im.Annotations, labels) {
		return fmt.Errorf("index annotations %v, want %v", im.Annotations, labels)
	}
	var got []v1.Platform
	for _, m := range im.Manifests {
		if m.Platform == nil {
			return fmt.Errorf("manifest %s has no platform", m.Digest)
		}
		got = append(got, *m.Platform)
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		if err := checkImage(img, *m.Platform, want); err != nil {
			return fmt.Errorf("%s/%s: %w", m.Platform.OS, m.Platform.Architecture, err)
		}
	}
	if !reflect.DeepEqual(got, want.platforms) {
		return fmt.Errorf("platforms %v, want %v", got, want.platforms)
	}
	return nil
}

// checkBlobs checks that every blob is named by its sha256, that every blob
// a manifest or index names is there with its size, and that there is
// nothing else.
func checkBlobs(dir string) error {
	entries, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return err
	}
	have := map[string]int64{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != e.Name() {
			return fmt.Errorf("blob %s: content hash is %x", e.Name(), sum)
		}
		have[e.Name()] = int64(len(data))
	}
	seen := map[string]bool{}
	var walk func(desc v1.Descriptor) error
	walk = func(desc v1.Descriptor) error {
		size, ok := have[desc.Digest.Hex]
		if desc.Digest.Algorithm != "sha256" || !ok {
			return fmt.Errorf("blob %s is missing", desc.Digest)
		}
		if size != desc.Size {
			return fmt.Errorf("blob %s: size %d, descriptor says %d", desc.Digest, size, desc.Size)
		}
		seen[desc.Digest.Hex] = true
		switch {
		case desc.MediaType.IsIndex():
			var im v1.IndexManifest
			if err := readJSON(filepath.Join(dir, "blobs", "sha256", desc.Digest.Hex), &im); err != nil {
				return err
			}
			for _, m := range im.Manifests {
				if err := walk(m); err != nil {
					return err
				}
			}
		case desc.MediaType.IsImage():
			var m v1.Manifest
			if err := readJSON(filepath.Join(dir, "blobs", "sha256", desc.Digest.Hex), &m); err != nil {
				return err
			}
			for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
				if err := walk(d); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var top v1.IndexManifest
	if err := readJSON(filepath.Join(dir, "index.json"), &top); err != nil {
		return err
	}
	for _, m := range top.Manifests {
		if err := walk(m); err != nil {
			return err
		}
	}
	for h := range have {
		if !seen[h] {
			return fmt.Errorf("blob %s is not referenced", h)
		}
	}
	return nil
}

func checkImage(img v1.Image, p v1.Platform, want expectation) error {
	c := want.component
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	if mt != types.OCIManifestSchema1 {
		return fmt.Errorf("manifest media type %s", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		return fmt.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		return fmt.Errorf("config user %q, want 65532:65532", cf.Config.User)
	}
	labels := want.md.labels(c.name)
	if !maps.Equal(cf.Config.Labels, labels) {
		return fmt.Errorf("config labels %v, want %v", cf.Config.Labels, labels)
	}
	if !cf.Created.Time.Equal(want.md.created) {
		return fmt.Errorf("config created %s, want %s", cf.Created.Time, want.md.created)
	}
	if entry := []string{"/usr/local/bin/" + c.name}; !slices.Equal(cf.Config.Entrypoint, entry) {
		return fmt.Errorf("entrypoint %v, want %v", cf.Config.Entrypoint, entry)
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	if !maps.Equal(m.Annotations, labels) {
		return fmt.Errorf("manifest annotations %v, want %v", m.Annotations, labels)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(want.md.created) {
			return fmt.Errorf("layer: %s owned by %d:%d (%q:%q), time %s", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.ModTime)
		}
		names = append(names, fmt.Sprintf("%s %o", hdr.Name, hdr.Mode))
		if hdr.Typeflag == tar.TypeReg {
			if files[hdr.Name], err = io.ReadAll(tr); err != nil {
				return err
			}
		} else if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("layer: %s has type %c", hdr.Name, hdr.Typeflag)
		}
	}
	wantNames := []string{
		"etc/ 755", "etc/group 644", "etc/passwd 644", "etc/ssl/ 755", "etc/ssl/certs/ 755",
		"etc/ssl/certs/ca-certificates.crt 644", "usr/ 755", "usr/local/ 755", "usr/local/bin/ 755",
		"usr/local/bin/" + c.name + " 755",
	}
	if !slices.Equal(names, wantNames) {
		return fmt.Errorf("layer holds %q, want %q", names, wantNames)
	}
	if !strings.Contains(string(files["etc/passwd"]), "\nnonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"]), "\nnonroot:x:65532:") {
		return fmt.Errorf("layer: no nonroot user or group:\n%s%s", files["etc/passwd"], files["etc/group"])
	}
	if n, err := countCerts(files[caFile]); err != nil || n < 100 {
		return fmt.Errorf("layer: CA bundle holds %d certificates (%v)", n, err)
	}
	bin := files["usr/local/bin/"+c.name]
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("layer: binary: %w", err)
	}
	if wantMachine := elfMachines[p.Architecture]; f.Machine != wantMachine {
		return fmt.Errorf("layer: binary is %v, want %v", f.Machine, wantMachine)
	}
	if !bytes.Equal(bin, want.bins[p.Architecture]) {
		return fmt.Errorf("layer: binary is not the one built for %s", p.Architecture)
	}
	return nil
}

func countCerts(data []byte) (int, error) {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return n, err
		}
		n++
	}
	if len(bytes.TrimSpace(data)) != 0 {
		return n, fmt.Errorf("trailing data after %d certificates", n)
	}
	return n, nil
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var prev string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Name <= prev {
			return fmt.Errorf("archive: %s after %s: entries not sorted", hdr.Name, prev)
		}
		prev = hdr.Name
		if hdr.Uid != 0 || hdr.Gid != 0 {
			return fmt.Errorf("archive: %s owned by %d:%d", hdr.Name, hdr.Uid, hdr.Gid)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("archive: %s has type %c", hdr.Name, hdr.Typeflag)
		}
	}
}

func corruptLargestBlob(t *testing.T, dir string) {
	t.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		t.Fatal(err)
	}
	var largest string
	var size int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > size {
			largest, size = e.Name(), info.Size()
		}
	}
	path := filepath.Join(blobs, largest)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
