package downstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
)

// encoded is obj as a kube-apiserver sends it: in protobuf or JSON, with
// its apiVersion and kind.
func encoded(t *testing.T, obj runtime.Object, gv schema.GroupVersion, proto bool) []byte {
	t.Helper()
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(s)
	var enc runtime.Encoder = protobuf.NewSerializer(s, s)
	if !proto {
		info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
		enc = info.Serializer
	}
	data, err := runtime.Encode(codecs.EncoderForVersion(enc, gv), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A write reads back the object's metadata: it asks for
// PartialObjectMetadata with the object itself as the fallback, and takes
// the resourceVersion from either answer; an error answer stays the
// error the server sent.
func TestWriteMetadata(t *testing.T) {
	pom := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", ResourceVersion: "42"}}
	whole := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", ResourceVersion: "43"},
		Data: map[string][]byte{"password": []byte("s3cret")}}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "db", nil).Status()
	metaGV := metav1.SchemeGroupVersion
	cases := []struct {
		name        string
		update      bool
		code        int
		contentType string
		body        []byte
		wantPath    string
		wantRV      string
		wantErr     func(error) bool
	}{
		{name: "create, metadata in protobuf", code: 201,
			contentType: runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
			body:        encoded(t, pom, metaGV, true), wantPath: "POST /api/v1/namespaces/apps/secrets", wantRV: "42"},
		{name: "update, metadata in JSON", update: true, code: 200,
			contentType: runtime.ContentTypeJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
			body:        encoded(t, pom, metaGV, false), wantPath: "PUT /api/v1/namespaces/apps/secrets/db", wantRV: "42"},
		{name: "update, a server that answers with the whole object", update: true, code: 200,
			contentType: runtime.ContentTypeProtobuf, body: encoded(t, whole, corev1.SchemeGroupVersion, true),
			wantPath: "PUT /api/v1/namespaces/apps/secrets/db", wantRV: "43"},
		{name: "update refused: the server's error", update: true, code: 409, contentType: runtime.ContentTypeJSON,
			body: encoded(t, &conflict, metaGV, false), wantPath: "PUT /api/v1/namespaces/apps/secrets/db", wantErr: apierrors.IsConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gotPath, gotAccept, gotManager string
			var gotBody []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotAccept, gotManager = r.Method+" "+r.URL.Path, r.Header.Get("Accept"), r.URL.Query().Get("fieldManager")
				gotBody, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.code)
				_, _ = w.Write(tc.body)
			}))
			defer srv.Close()
			cs, err := NewClientset(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			mw, ok := cs.(MetadataWriter)
			if !ok {
				t.Fatal("NewClientset's clientset is not a MetadataWriter")
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", ResourceVersion: "41"},
				Data: map[string][]byte{"password": []byte("s3cret")}}

			var got metav1.Object
			if tc.update {
				got, err = mw.UpdateMetadata(context.Background(), secret, metav1.UpdateOptions{FieldManager: "courier"})
			} else {
				got, err = mw.CreateMetadata(context.Background(), secret, metav1.CreateOptions{FieldManager: "courier"})
			}

			if gotPath != tc.wantPath || gotManager != "courier" {
				t.Errorf("request %q fieldManager %q, want %q courier", gotPath, gotManager, tc.wantPath)
			}
			if !strings.HasPrefix(gotAccept, metadataAccept) {
				t.Errorf("Accept %q, want %q", gotAccept, metadataAccept)
			}
			if !strings.Contains(string(gotBody), "s3cret") {
				t.Error("the request did not carry the Secret's data")
			}
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Errorf("error %v, not the kind the server sent", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if got.GetResourceVersion() != tc.wantRV {
				t.Errorf("resourceVersion %q, want %q", got.GetResourceVersion(), tc.wantRV)
			}
		})
	}
}

// Only Secrets and ConfigMaps are written this way.
func TestWriteMetadataRefusesOtherKinds(t *testing.T) {
	cs, err := NewClientset(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.(MetadataWriter).CreateMetadata(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "cannot write") {
		t.Errorf("error %v, want one saying it cannot write a Namespace", err)
	}
}
