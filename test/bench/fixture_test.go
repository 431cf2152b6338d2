package bench

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The same-shape pool's copies carry the labels and annotations below,
// written out by hand from one copy Courier wrote on 2026-12-01
// (copyspec.Secret for Cluster c500 of HelmOp bench-1000-ws/scale, source
// resourceVersion 123456), less the courier.dev/cluster annotation Courier
// stopped writing on 2026-12-02: the same number of keys, each key of the same
// length with Courier's "courier.dev/" prefix spelled "courierpool/" (so
// that Courier's watches, which select on its keys, never see the pool's
// copies), and values of the same lengths. They are a frozen fixture, not
// built by Courier's code: a baseline that reused the code under test
// would move with it, and growth of Courier's metadata would cancel out of
// the ratio. checkShapeFixture compares them with a copy Courier wrote in
// the same run, so that drift is noticed.

// shapeLabels are the fixture's labels. benchLabel is the benchmark's own
// (Courier's copies take it from their sources), with a value as long as
// Courier's ("courier").
func shapeLabels() map[string]string {
	return map[string]string{
		benchLabel:                 "fixture",
		"courierpool/managed-by":   "courier",
		"courierpool/owner":        "9dea2f44e894e8242cb2b9eb4113bd7095927d81",
		"courierpool/cluster-hash": "1e9079d62de5e10ef2f500ae95df25e9f65bb8e8",
	}
}

// shapeAnnotations are the fixture's annotations.
func shapeAnnotations() map[string]string {
	return map[string]string{
		"courierpool/helmop":                  "bench-1000-ws/scale",
		"courierpool/upstream":                "6f1c2a9e-3b7d-4e21-9a5c-0d8e7f6b5a43",
		"courierpool/source-resource-version": "123456",
	}
}

// shapeSlack is how many bytes of values a copy Courier writes may differ
// from the fixture by without counting as drift: its values name the
// HelmOp's namespace, the Cluster and the source's resourceVersion, whose
// lengths vary with N, the Cluster's number and etcd's revision.
const shapeSlack = 8

// metaShape is what the kube-apiservers' cost per write follows in a
// copy's metadata: its keys (with the owner's prefix cut off) and the
// bytes of keys and values.
type metaShape struct {
	labels, annotations []string // keys without their prefix, sorted
	keyBytes, valBytes  int
}

func shapeOf(labels, annotations map[string]string, prefix string) metaShape {
	var s metaShape
	keys := func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			s.keyBytes += len(k)
			s.valBytes += len(v)
			out = append(out, strings.TrimPrefix(k, prefix))
		}
		sort.Strings(out)
		return out
	}
	s.labels, s.annotations = keys(labels), keys(annotations)
	return s
}

func (s metaShape) String() string {
	return fmt.Sprintf("%d labels and %d annotations, %d bytes of keys and values (%d of keys)",
		len(s.labels), len(s.annotations), s.keyBytes+s.valBytes, s.keyBytes)
}

// checkShapeFixture compares the fixture with c, a copy Courier wrote:
// the same keys (prefix aside), the same key bytes, and value bytes within
// shapeSlack. It returns both shapes and what differs ("" when nothing
// does).
func checkShapeFixture(c *corev1.Secret) (courierShape, fixture metaShape, drift string) {
	courierShape = shapeOf(c.Labels, c.Annotations, "courier.dev/")
	fixture = shapeOf(shapeLabels(), shapeAnnotations(), "courierpool/")
	var what []string
	if strings.Join(courierShape.labels, ",") != strings.Join(fixture.labels, ",") {
		what = append(what, fmt.Sprintf("label keys %v, the fixture's %v", courierShape.labels, fixture.labels))
	}
	if strings.Join(courierShape.annotations, ",") != strings.Join(fixture.annotations, ",") {
		what = append(what, fmt.Sprintf("annotation keys %v, the fixture's %v", courierShape.annotations, fixture.annotations))
	}
	if courierShape.keyBytes != fixture.keyBytes {
		what = append(what, fmt.Sprintf("%d bytes of keys, the fixture %d", courierShape.keyBytes, fixture.keyBytes))
	}
	if d := courierShape.valBytes - fixture.valBytes; d > shapeSlack || d < -shapeSlack {
		what = append(what, fmt.Sprintf("%d bytes of values, the fixture %d", courierShape.valBytes, fixture.valBytes))
	}
	return courierShape, fixture, strings.Join(what, "; ")
}
