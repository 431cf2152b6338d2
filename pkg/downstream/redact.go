package downstream

// Redaction of the errors quoted from reading a kubeconfig, so that a
// status row can say why a kubeconfig was refused without carrying its
// credentials.

import (
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// redact replaces in msg every word of the kubeconfig data that is not a key, so that an
// error quoting a token, a password or a server URL does not carry it into a status row.
// Words are split at whitespace and YAML/JSON punctuation; words shorter than 3 are kept.
// The words are those of the data as written and, since a message quotes what the parser
// made of them, the names of its YAML anchors and aliases ("*tok-..." is quoted
// "tok-...") and, when it parses, the words of its string values as decoded ("tok\x2d..."
// is quoted "tok-...").
//
// The words of the parsers' own messages (parserVocabulary) are kept, or they would be
// hidden whenever the data happens to hold them too: "{{{ this: is [not yaml" made
// "yaml: did not find expected ',' or '}'" read "<redacted>: did <redacted> find expected
// ',' or '}'". Keeping them is no leak. A word of the data is only ever shown when it is
// one of a fixed list of common English words and parser terms, published here; a token,
// a password, a certificate or a server URL that is nothing but such a word ("expected",
// "mapping") is no credible secret, and a reader cannot tell it from the parser's own use
// of the word. Any other word is redacted, also one that merely contains a vocabulary word
// ("notyaml-s3cr3t"), and the replacement is by substring, so a secret is hidden wherever
// the message quotes it.
func redact(msg string, data []byte) string {
	seen := map[string]bool{}
	var words []string
	add := func(w string) {
		if len(w) >= 3 && !seen[w] && !parserVocabulary[w] && strings.Contains(msg, w) {
			seen[w] = true
			words = append(words, w)
		}
	}
	eachWord(string(data), true, func(w string) {
		add(w)
		if w[0] == '&' || w[0] == '*' {
			add(anchorName(w[1:]))
		}
	})
	var v any
	if yaml.Unmarshal(data, &v) == nil {
		eachString(v, func(s string) { eachWord(s, false, add) })
	}
	sort.Slice(words, func(a, b int) bool { return len(words[a]) > len(words[b]) })
	pairs := make([]string, 0, 2*len(words))
	for _, w := range words {
		pairs = append(pairs, w, "<redacted>")
	}
	return strings.NewReplacer(pairs...).Replace(msg)
}

// eachWord calls f with each word of s, split at whitespace and YAML/JSON punctuation;
// with skipKeys, not with a word followed by ':' and a blank (or the end), a mapping key.
func eachWord(s string, skipKeys bool, f func(string)) {
	isSep := func(b byte) bool { return strings.IndexByte(" \t\r\n:,[]{}\"'", b) >= 0 }
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && !isSep(s[j]) {
			j++
		}
		if j == i {
			i++
			continue
		}
		w, k := s[i:j], j
		if k < len(s) && (s[k] == '"' || s[k] == '\'') {
			k++
		}
		isKey := k < len(s) && s[k] == ':' && (k > j || k+1 == len(s) || strings.IndexByte(" \t\r\n", s[k+1]) >= 0)
		if !skipKeys || !isKey {
			f(w)
		}
		i = j
	}
}

// anchorName is the name the YAML parser reads after '&' or '*': letters, digits, '_' and
// '-' (go.yaml.in/yaml/v2's is_alpha).
func anchorName(s string) string {
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || s[n] == '_' || s[n] == '-') {
		n++
	}
	return s[:n]
}

// eachString calls f with each string value in v, decoded YAML or JSON; map keys are
// left out, as eachWord leaves out keys.
func eachString(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			eachString(e, f)
		}
	case map[string]any:
		for _, e := range v {
			eachString(e, f)
		}
	}
}

// parserVocabulary are the words (of 3 characters or more, as redact splits them) of the
// messages that reading a kubeconfig can fail with: go.yaml.in/yaml/v2's scanner, parser
// and decoder (through sigs.k8s.io/yaml), encoding/json's syntax and type errors,
// apimachinery's decoder and clientcmd's validation. They say what is wrong, never what
// the data holds, and redact never hides them. Only whole words count: the list is not a
// pattern, and a word of the data that is not exactly one of these is redacted.
var parserVocabulary = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		yaml YAML %YAML %TAG TAG json JSON line column
		did not could find found expected unexpected the that this cannot start any token
		mapping mappings values value keys key are allowed context block sequence entries
		entry collection node content document stream end indicator directive name names tag
		handle URI escape escaped octet version number whitespace break comment alphabetic
		numeric digit hexdecimal character characters while parsing scanning scalar plain
		quoted single-quoted double-quoted literal folded flow simple complex alias anchor
		tab violates indentation where space leading trailing incorrect invalid Unicode code
		duplicate extremely long incompatible undefined unknown non-alphabetical control
		surrogate area low incomplete UTF-8 UTF-16 pair length increasing level next for
		referenced contains itself excessive aliasing exceeded max depth !!binary binary
		base64 data input error converting decoding unmarshaling marshaling into unmarshal
		Go struct field type looking beginning object array element string true false null
		expecting after pair couldn get version/kind parse registered scheme kind
		invalid configuration provided try setting KUBERNETES_MASTER environment variable
		was specified cluster has server defined host must URL port
	`) {
		m[w] = true
	}
	return m
}()
