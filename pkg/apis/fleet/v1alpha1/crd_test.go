package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
)

// schemaNode is the part of an OpenAPI v3 schema this test reads.
type schemaNode struct {
	Type                 string                `json:"type"`
	Properties           map[string]schemaNode `json:"properties"`
	Items                *schemaNode           `json:"items"`
	AdditionalProperties *schemaNode           `json:"additionalProperties"`
	PreserveUnknown      bool                  `json:"x-kubernetes-preserve-unknown-fields"`
}

// TestOwnCRDsDeclareEveryDecodedField checks Courier's own Fleet CRDs
// (artifacts/crds, for clusters without Fleet) against these Go types:
// every field Courier decodes must be declared with its type, so that the
// kube-apiserver refuses a wrong type. A field left to
// x-kubernetes-preserve-unknown-fields would accept, say, a
// clusterSelector whose matchLabels is a string; Courier's informer could
// then not decode the list it belongs to, and every HelmOp (or
// ClusterGroup) of the cluster would stop syncing, not only the bad one.
func TestOwnCRDsDeclareEveryDecodedField(t *testing.T) {
	for file, obj := range map[string]any{
		"helmops.fleet.cattle.io.yaml":       HelmOp{},
		"clusters.fleet.cattle.io.yaml":      Cluster{},
		"clustergroups.fleet.cattle.io.yaml": ClusterGroup{},
		"bundles.fleet.cattle.io.yaml":       Bundle{},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "artifacts", "crds", file))
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema schemaNode `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != "v1alpha1" {
				continue
			}
			spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
			if !ok {
				t.Errorf("%s: no spec in the schema", file)
				continue
			}
			f, _ := reflect.TypeOf(obj).FieldByName("Spec")
			checkType(t, file+": spec", f.Type, spec)
		}
	}
}

func checkType(t *testing.T, path string, typ reflect.Type, s schemaNode) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Slice: "array",
		reflect.Map: "object", reflect.Struct: "object", reflect.Int: "integer", reflect.Int32: "integer", reflect.Int64: "integer"}[typ.Kind()]
	if s.Type != want {
		t.Errorf("%s: schema type %q, the Go type %s decodes %q", path, s.Type, typ, want)
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		if s.Items == nil {
			t.Errorf("%s: array without items", path)
			return
		}
		checkType(t, path+"[]", typ.Elem(), *s.Items)
	case reflect.Map:
		if s.AdditionalProperties == nil {
			t.Errorf("%s: map without additionalProperties (preserve-unknown-fields: %v)", path, s.PreserveUnknown)
			return
		}
		checkType(t, path+"{}", typ.Elem(), *s.AdditionalProperties)
	case reflect.Struct:
		for _, f := range fields(typ) {
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			p, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s: not declared (preserve-unknown-fields: %v), so a wrong type would reach Courier's informer", path, name, s.PreserveUnknown)
				continue
			}
			checkType(t, path+"."+name, f.Type, p)
		}
	}
}

// fields are typ's JSON fields, embedded (",inline") structs flattened.
func fields(typ reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && strings.Contains(tag, "inline") {
			out = append(out, fields(f.Type)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// TestOneBadItemFailsTheList shows why the check above matters: a list
// (what an informer reads) with one HelmOp of a wrong type does not decode
// at all.
func TestOneBadItemFailsTheList(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "good"}})
	list := `{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"HelmOpList","metadata":{},"items":[` + string(good) +
		`,{"metadata":{"name":"bad"},"spec":{"targets":[{"clusterSelector":{"matchLabels":"env=prod"}}]}}]}`
	_, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(list), nil, nil)
	if err == nil {
		t.Fatal("a HelmOp list with a string matchLabels decoded; this test's premise no longer holds")
	}
}
