package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestKrewManifestFills: artifacts/krew/courier.yaml fills into a manifest
// that names both platforms' archives and sums, and a missing value is an
// error rather than an empty field.
func TestKrewManifestFills(t *testing.T) {
	tmpl, err := os.ReadFile("../../artifacts/krew/courier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"VERSION": "v0.1.0"}
	for _, a := range []string{"amd64", "arm64"} {
		values["SHA256_linux_"+a] = strings.Repeat("ab", 32)
		values["URI_linux_"+a] = "https://example.org/kubectl-courier_linux_" + a + ".tar.gz"
	}
	out, err := fillManifest(string(tmpl), values)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "{{") || !strings.Contains(out, `version: "v0.1.0"`) ||
		strings.Count(out, `sha256: "`+strings.Repeat("ab", 32)+`"`) != 2 || strings.Count(out, "bin: kubectl-courier") != 2 ||
		!strings.Contains(out, `uri: "https://example.org/kubectl-courier_linux_arm64.tar.gz"`) || !strings.Contains(out, "kind: Plugin") {
		t.Fatalf("manifest:\n%s", out)
	}
	delete(values, "SHA256_linux_arm64")
	if _, err := fillManifest(string(tmpl), values); err == nil || !strings.Contains(err.Error(), "SHA256_linux_arm64") {
		t.Errorf("a missing sum: %v", err)
	}
}

// TestPluginArchiveIsStable: the same binary gives the same archive bytes,
// holding kubectl-courier alone, executable.
func TestPluginArchiveIsStable(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, err := pluginArchive([]byte("binary"), mtime)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pluginArchive([]byte("binary"), mtime)
	if !bytes.Equal(a, b) {
		t.Error("two archives of one binary differ")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	h, err := tr.Next()
	if err != nil || h.Name != "kubectl-courier" || h.Mode != 0o755 {
		t.Fatalf("entry %+v, %v", h, err)
	}
	if data, _ := io.ReadAll(tr); string(data) != "binary" {
		t.Errorf("content %q", data)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more than one entry: %v", err)
	}
}
