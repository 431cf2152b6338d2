package server

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func parseFieldCopyFlags(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions(io.Discard, io.Discard)
	cmd := NewCommand(context.Background(), o)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return o, errors.Join(o.FieldCopy.validate()...)
}

// TestFieldCopyFlags checks that targets are repeatable and comma-separated
// and that every malformed target or namespace is reported at once.
func TestFieldCopyFlags(t *testing.T) {
	o, err := parseFieldCopyFlags(t,
		"--fieldcopy-target=secrets,deployments.v1.apps", "--fieldcopy-target=FederatedSecret",
		"--fieldcopy-namespace=ns1,ns2", "--fieldcopy-cross-namespace", "--fieldcopy-secret-sources")
	if err != nil {
		t.Fatal(err)
	}
	want := FieldCopyOptions{
		Targets:        []string{"secrets", "deployments.v1.apps", "FederatedSecret"},
		Namespaces:     []string{"ns1", "ns2"},
		CrossNamespace: true,
		SecretSources:  true,
	}
	if !reflect.DeepEqual(o.FieldCopy, want) {
		t.Fatalf("got %+v, want %+v", o.FieldCopy, want)
	}

	_, err = parseFieldCopyFlags(t, "--fieldcopy-target=a..b", "--fieldcopy-target=apps/deployments", "--fieldcopy-namespace=Bad_NS")
	if err == nil {
		t.Fatal("malformed flags accepted")
	}
	for _, sub := range []string{`"a..b"`, `"apps/deployments"`, `"Bad_NS"`} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error does not mention %s:\n%v", sub, err)
		}
	}

	if _, err := parseFieldCopyFlags(t, "--fieldcopy-cross-namespace"); err == nil || !strings.Contains(err.Error(), "need --fieldcopy-target") {
		t.Errorf("--fieldcopy-cross-namespace without targets: %v", err)
	}
	if _, err := parseFieldCopyFlags(t, "--fieldcopy-secret-sources"); err == nil || !strings.Contains(err.Error(), "need --fieldcopy-target") {
		t.Errorf("--fieldcopy-secret-sources without targets: %v", err)
	}
	if o, _ := parseFieldCopyFlags(t, "--fieldcopy-target=secret"); o.FieldCopy.SecretSources {
		t.Error("--fieldcopy-secret-sources is on by default")
	}
}
