package kubeproto

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestConfig(t *testing.T) {
	limiter := flowcontrol.NewTokenBucketRateLimiter(10, 20)
	cases := []struct {
		name       string
		in         rest.Config
		wantType   string
		wantAccept string
	}{
		{name: "nothing named: protobuf, JSON still accepted", in: rest.Config{Host: "https://d:6443", RateLimiter: limiter},
			wantType: runtime.ContentTypeProtobuf, wantAccept: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON},
		{name: "a content type named: kept", in: rest.Config{Host: "https://d:6443", RateLimiter: limiter,
			ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeJSON}},
			wantType: runtime.ContentTypeJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			out := Config(&in)
			if out.ContentType != tc.wantType || out.AcceptContentTypes != tc.wantAccept {
				t.Errorf("content type %q, accept %q; want %q, %q", out.ContentType, out.AcceptContentTypes, tc.wantType, tc.wantAccept)
			}
			if out.RateLimiter != limiter {
				t.Error("the cluster's rate limiter was not kept: every clientset would get a bucket of its own")
			}
			if in.ContentType != tc.in.ContentType {
				t.Errorf("the caller's config was changed: %q", in.ContentType)
			}
		})
	}
}
