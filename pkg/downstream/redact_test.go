package downstream

import "testing"

func TestRedact(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://admin:s3cr3t-pw@host\n\"token\": \"abc123xyz\"\ncurrent-context: ctx\n")
	notYAML := []byte("{{{ this: is [not yaml")
	tests := []struct {
		name      string
		data      []byte
		msg, want string
	}{
		{"keys are kept", data, "cluster has no server defined", "cluster has no server defined"},
		{"a server URL", data, `host: "https://admin:s3cr3t-pw@host"`, `host: "<redacted>:<redacted>:<redacted>"`},
		{"a token", data, "bad token abc123xyz", "bad token <redacted>"},
		{"a context name", data, "context ctx not found", "context <redacted> not found"},
		// The parser's own words stay, though the data holds "not" and
		// "yaml" too: the message reads as the parser wrote it.
		{"the parser's words in the data", notYAML, "yaml: did not find expected ',' or '}'", "yaml: did not find expected ',' or '}'"},
		{"the parser's words in a JSON type error", []byte("clusters: cannot unmarshal string"), "json: cannot unmarshal string into Go struct field Config.clusters of type []v1.NamedCluster",
			"json: cannot unmarshal string into Go struct field Config.clusters of type []v1.NamedCluster"},
		// A token that is a word of the parsers' messages shows: no
		// credible secret is "expected", and the reader cannot tell it
		// from the parser's word. The positive control beside it: a
		// token that only contains such words is redacted.
		{"a token that is a parser word", []byte("users: [{name: u, user: {token: expected}}"), "yaml: line 1: did not find expected ',' or '}'",
			"yaml: line 1: did not find expected ',' or '}'"},
		{"a token that contains parser words", []byte("users: [{name: u, user: {token: notyaml-expected}}"), "unknown anchor 'notyaml-expected' referenced",
			"unknown anchor '<redacted>' referenced"},
		// The parser quotes an alias without its '*', and only the
		// characters a name may have.
		{"an alias", []byte("&s3cr3t x: *s3cr3t2"), "yaml: unknown anchor 's3cr3t2' referenced", "yaml: unknown anchor '<redacted>' referenced"},
		{"an alias with more after it", []byte("token: *s3cr3t2?x"), "yaml: unknown anchor 's3cr3t2' referenced", "yaml: unknown anchor '<redacted>' referenced"},
		// clientcmd quotes a value as decoded, not as written.
		{"a value written with escapes", []byte(`current-context: "s3cr\x2d3t"`), "context was not found for specified context: s3cr-3t",
			"context was not found for specified context: <redacted>"},
		{"a JSON value written with escapes", []byte(`{"current-context": "s3cr\u002d3t"}`), "context was not found for specified context: s3cr-3t",
			"context was not found for specified context: <redacted>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := redact(tc.msg, tc.data); got != tc.want {
				t.Errorf("redact(%q) = %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}
