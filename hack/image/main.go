// Command image builds Courier's container images without Docker and
// without a registry (`make image`, docs/design.md#tests-against-real-servers): for each of
// courier-apiserver and courier-agent, a multi-platform OCI image index for
// linux/amd64 and linux/arm64, written as an OCI image-layout tarball under
// _output/images that `ctr -n k8s.io images import`, `skopeo copy
// oci-archive:...` and (unpacked) `crane push` accept.
//
// The images are reproducible: the same commit, Go toolchain and flags give
// the same digests. Every timestamp is the commit's time (SOURCE_DATE_EPOCH
// overrides it), tar entries are sorted with fixed owners and modes, the
// binaries are built with -trimpath, an empty build ID and a pinned build
// environment, and the CA bundle comes from a pinned Go module rather than
// from the host.
//
// Each image holds one layer and nothing but what the binary needs:
//
//	/etc/passwd, /etc/group           root and nonroot (65532)
//	/etc/ssl/certs/ca-certificates.crt the Mozilla roots of
//	                                   golang.org/x/crypto/x509roots/fallback
//	/usr/local/bin/<binary>           the static binary, the entrypoint
//
// and runs as 65532:65532. There is no /tmp and no shell: a Pod that runs
// courier-apiserver without --tls-cert-file (it then writes a self-signed
// certificate under --cert-dir) needs a writable volume there; the shipped
// manifests and charts pass --tls-cert-file and mount an emptyDir at /tmp.
//
// It lives in its own module (hack/image/go.mod) so that
// go-containerregistry's requirements do not move the versions of the
// modules Courier itself is built from.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const (
	// user is the image's user: distroless's nonroot, which the manifests'
	// securityContext (runAsUser/runAsGroup 65532, runAsNonRoot) expects.
	// Numeric, so that the kubelet can check runAsNonRoot without reading
	// /etc/passwd.
	user    = "65532:65532"
	binDir  = "usr/local/bin"
	caFile  = "etc/ssl/certs/ca-certificates.crt"
	refName = "org.opencontainers.image.ref.name"
)

// component is one binary and its image.
type component struct {
	name       string // binary and archive name
	pkg        string // Go package, relative to the repository root
	repository string // image name under -registry (the charts' defaults)
	ports      []string
}

var components = []component{
	{name: "courier-apiserver", pkg: "./cmd/apiserver", repository: "courier", ports: []string{"8443/tcp"}},
	{name: "courier-agent", pkg: "./cmd/agent", repository: "courier-agent", ports: []string{"8080/tcp", "8081/tcp"}},
}

// elfMachines are the platforms images are built for and the ELF machine
// each one's binary must be.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// metadata is what the labels and annotations say about the build.
type metadata struct {
	version  string
	revision string
	source   string
	licenses string
	created  time.Time
}

// labels are the OCI labels of each config, also set as annotations on each
// manifest and on the index.
func (md metadata) labels(title string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.source":   md.source,
		"org.opencontainers.image.revision": md.revision,
		"org.opencontainers.image.version":  md.version,
		"org.opencontainers.image.created":  md.created.UTC().Format(time.RFC3339),
	}
	if md.licenses != "" {
		l["org.opencontainers.image.licenses"] = md.licenses
	}
	return l
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hack/image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	root := fs.String("repo-root", ".", "repository root: where the binaries are built and git is asked for the commit")
	out := fs.String("out", "_output/images", "directory the OCI archives are written to")
	bins := fs.String("bin-dir", "_output/bin", "directory the static binaries are written to (<bin-dir>/<os>_<arch>/)")
	version := fs.String("version", "", "Courier's version (the Makefile's VERSION); required")
	ldflags := fs.String("ldflags", "", "the Makefile's LDFLAGS (-X flags for the version); -s -w -buildid= are added")
	tag := fs.String("tag", "", `image tag (default: -version with "+" replaced by "_")`)
	registry := fs.String("registry", "ghcr.io/courier-dev", "images are named <registry>/courier and <registry>/courier-agent")
	source := fs.String("source", "https://github.com/courier-dev/courier", "org.opencontainers.image.source")
	licenses := fs.String("licenses", "", "org.opencontainers.image.licenses (SPDX); left out when empty")
	platformList := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	pluginURI := fs.String("plugin-uri", "https://github.com/courier-dev/courier/releases/download/<version>", "where the krew manifest says the plugin's archives are (<version> is replaced)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return errors.New("-version is required")
	}
	if *tag == "" {
		*tag = strings.ReplaceAll(*version, "+", "_")
	}
	platforms, err := parsePlatforms(*platformList)
	if err != nil {
		return err
	}
	md, err := gitMetadata(ctx, *root)
	if err != nil {
		return err
	}
	md.version, md.source, md.licenses = *version, *source, *licenses

	for _, c := range components {
		ref, err := name.NewTag(*registry+"/"+c.repository+":"+*tag, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("image name for %s: %w", c.name, err)
		}
		binaries := map[string][]byte{}
		for _, p := range platforms {
			data, err := buildChecked(ctx, *root, c.pkg, p, *ldflags, filepath.Join(*bins, p.OS+"_"+p.Architecture, c.name))
			if err != nil {
				return err
			}
			binaries[p.Architecture] = data
		}
		idx, err := buildIndex(c, platforms, binaries, md)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		archive := filepath.Join(*out, c.name+".oci.tar")
		if err := writeArchive(archive, idx, ref.String(), md.created); err != nil {
			return err
		}
		if err := report(os.Stdout, archive, ref.String(), idx); err != nil {
			return err
		}
	}
	return buildPlugin(ctx, *root, *bins, *out, *ldflags, *version, strings.ReplaceAll(*pluginURI, "<version>", *version), platforms, md.created)
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos != "linux" {
			return nil, fmt.Errorf("platform %q: only linux/<arch> is built", f)
		}
		if _, ok := elfMachines[arch]; !ok {
			return nil, fmt.Errorf("platform %q: unknown architecture", f)
		}
		ps = append(ps, v1.Platform{OS: goos, Architecture: arch})
	}
	return ps, nil
}

// gitMetadata reads the commit and its time; SOURCE_DATE_EPOCH, when set,
// replaces the time (https://reproducible-builds.org/specs/source-date-epoch/).
func gitMetadata(ctx context.Context, root string) (metadata, error) {
	var md metadata
	rev, err := gitOutput(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return md, err
	}
	md.revision = rev
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = gitOutput(ctx, root, "log", "-1", "--format=%ct"); err != nil {
			return md, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return md, fmt.Errorf("commit time %q: %w", epoch, err)
	}
	md.created = time.Unix(secs, 0).UTC()
	if status, err := gitOutput(ctx, root, "status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
		fmt.Fprintf(os.Stderr, "hack/image: warning: the work tree has uncommitted changes; the images are labelled %s but are not built from it alone\n", rev)
	}
	return md, nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// buildEnv is the environment of `go build`: the caller's, less everything
// that would change the binary's bytes, plus a pinned target.
func buildEnv(p v1.Platform) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "GOFLAGS", k == "GOEXPERIMENT", k == "GOFIPS140", k == "GOOS", k == "GOARCH",
			k == "GOAMD64", k == "GOARM64", k == "GOARM", k == "GO386", strings.HasPrefix(k, "CGO_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=")
}

// buildChecked builds pkg for p into out (buildBinary) and returns the
// binary's bytes once checkBinary accepts them for p.
func buildChecked(ctx context.Context, dir, pkg string, p v1.Platform, ldflags, out string) ([]byte, error) {
	if err := buildBinary(ctx, dir, pkg, p, ldflags, out); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if err := checkBinary(data, p); err != nil {
		return nil, fmt.Errorf("%s: %w", out, err)
	}
	return data, nil
}

// buildBinary builds pkg (relative to dir) as a static binary for p: no
// cgo, -trimpath, no VCS stamp (the revision is in the image's labels, and
// a dirty work tree would change the bytes) and an empty build ID.
func buildBinary(ctx context.Context, dir, pkg string, p v1.Platform, ldflags, out string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", strings.TrimSpace("-s -w -buildid= "+ldflags), "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = buildEnv(p)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", pkg, p.OS, p.Architecture, err)
	}
	return nil
}

// checkBinary makes sure data is a static ELF executable for p: the right
// machine, no program interpreter and no shared libraries (there is no libc
// in the image).
func checkBinary(data []byte, p v1.Platform) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	if want := elfMachines[p.Architecture]; f.Machine != want {
		return fmt.Errorf("ELF machine %v, want %v for %s/%s", f.Machine, want, p.OS, p.Architecture)
	}
	for _, prog := range f.Progs {
		switch prog.Type {
		case elf.PT_INTERP:
			return errors.New("dynamically linked: it has a program interpreter")
		case elf.PT_DYNAMIC:
			return errors.New("dynamically linked: it has a dynamic section")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("dynamically linked against %v", libs)
	}
	return nil
}

// file is one entry of the image's layer.
type file struct {
	name string // relative, no leading slash; directories end in "/"
	mode int64
	data []byte
}

// rootFiles are the image's files for binary bin.
func rootFiles(binary string, bin []byte) []file {
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caFile, mode: 0o644, data: caBundle()},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: binDir + "/", mode: 0o755},
		{name: binDir + "/" + binary, mode: 0o755, data: bin},
	}
}

// caBundle is the PEM bundle of the roots in
// golang.org/x/crypto/x509roots/fallback (Mozilla's NSS store), in its
// order. Roots that NSS trusts only for certificates issued before a date
// are left out: a PEM file cannot carry that constraint.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// layerTar is the uncompressed tar of files: sorted, owned by 0:0, every
// time mtime.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	files = append([]file(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		hdr := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if strings.HasSuffix(f.name, "/") {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// imageOptions are the parts of an image the tests vary.
type imageOptions struct {
	user  string
	files []file
}

// buildImage is c's image for p, holding bin.
func buildImage(c component, p v1.Platform, bin []byte, md metadata) (v1.Image, error) {
	return buildImageWith(c, p, md, imageOptions{user: user, files: rootFiles(c.name, bin)})
}

func buildImageWith(c component, p v1.Platform, md metadata, o imageOptions) (v1.Image, error) {
	layerBytes, err := layerTar(o.files, md.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	ports := map[string]struct{}{}
	for _, port := range c.ports {
		ports[port] = struct{}{}
	}
	created := v1.Time{Time: md.created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:         o.user,
			Entrypoint:   []string{"/" + binDir + "/" + c.name},
			Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir:   "/",
			ExposedPorts: ports,
			Labels:       md.labels(c.name),
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "hack/image: " + c.name + " " + md.version,
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, md.labels(c.name)).(v1.Image), nil
}

// buildIndex is c's multi-platform index, binaries keyed by architecture.
func buildIndex(c component, platforms []v1.Platform, binaries map[string][]byte, md metadata) (v1.ImageIndex, error) {
	var imgs []v1.Image
	for _, p := range platforms {
		bin, ok := binaries[p.Architecture]
		if !ok {
			return nil, fmt.Errorf("no binary for %s/%s", p.OS, p.Architecture)
		}
		img, err := buildImage(c, p, bin, md)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	return newIndex(c, md, platforms, imgs), nil
}

// newIndex is the index of imgs, imgs[i] for platforms[i].
func newIndex(c component, md metadata, platforms []v1.Platform, imgs []v1.Image) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range imgs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platforms[i]},
		})
	}
	return mutate.Annotations(idx, md.labels(c.name)).(v1.ImageIndex)
}

// writeArchive writes idx as an OCI image layout in a tar file: index.json
// names idx with ref (org.opencontainers.image.ref.name, which `ctr images
// import` takes as the image's name), blobs/sha256/ holds every blob.
// Entries are sorted and owned by 0:0, every time mtime. The file is
// written next to path and renamed into place.
func writeArchive(path string, idx v1.ImageIndex, ref string, mtime time.Time) error {
	blobs := map[string][]byte{}
	add := func(data []byte) v1.Hash {
		sum := sha256.Sum256(data)
		h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
		blobs[h.Hex] = data
		return h
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	idxDigest := add(raw)
	idxSize := int64(len(raw))
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		if err := addImage(img, add); err != nil {
			return err
		}
	}
	indexJSON, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   types.OCIImageIndex,
			Size:        idxSize,
			Digest:      idxDigest,
			Annotations: map[string]string{refName: ref},
		}},
	})
	if err != nil {
		return err
	}
	files := []file{
		{name: "oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", mode: 0o644, data: indexJSON},
		{name: "blobs/", mode: 0o755},
		{name: "blobs/sha256/", mode: 0o755},
	}
	for hex, data := range blobs {
		files = append(files, file{name: "blobs/sha256/" + hex, mode: 0o644, data: data})
	}
	tarBytes, err := layerTar(files, mtime)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(tarBytes); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// addImage adds img's manifest, config and layers, checking that each
// layer's bytes match the digest its manifest names.
func addImage(img v1.Image, add func([]byte) v1.Hash) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	add(raw)
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	add(cfg)
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		want, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if got := add(data); got != want {
			return fmt.Errorf("layer %s: its bytes hash to %s", want, got)
		}
	}
	return nil
}

// report prints what was written: the archive, its size, its name and
// index digest, and each platform's manifest digest and compressed size.
func report(w io.Writer, archive, ref string, idx v1.ImageIndex) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(archive)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%s)\n  %s@%s\n", archive, mib(st.Size()), ref, d)
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		mf, err := img.Manifest()
		if err != nil {
			return err
		}
		size := mf.Config.Size
		for _, l := range mf.Layers {
			size += l.Size
		}
		fmt.Fprintf(w, "  %s\t%s\t%s compressed\n", path.Join(m.Platform.OS, m.Platform.Architecture), m.Digest, mib(size))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
