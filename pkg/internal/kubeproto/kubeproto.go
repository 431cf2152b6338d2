// Package kubeproto makes client configs speak protobuf to a
// kube-apiserver, for clients of built-in types only (CRDs, such as
// Fleet's, and Courier's own API speak JSON only).
package kubeproto

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Config returns a copy of cfg that sends and accepts protobuf, as
// kube-controller-manager's clients do (--kube-api-content-type), unless
// cfg names a content type already; JSON stays acceptable in answers.
// Every object and watch event is encoded and decoded on both sides of
// each request: in JSON a Secret's data is base64 inside a reflective
// decoder and a ConfigMap's data a map walked by reflection, in protobuf
// raw bytes behind generated code. The copy keeps cfg's rate limiter, so
// clients built from both share one bucket.
func Config(cfg *rest.Config) *rest.Config {
	if cfg.ContentType != "" {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}
