package copyspec

import (
	"bytes"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/copydigest"
)

// SecretUpToDate reports whether cur already equals want in everything
// Courier writes: type, data, immutable, labels and annotations. cur's data
// may be the digest a downstream cache keeps instead (pkg/copydigest).
// Labels and annotations must match exactly: the copy is Courier's, so a key added
// downstream by someone else is drift and is removed on the next write (a
// controller that keeps re-adding one will keep being overwritten).
// A nil map equals an empty one (the API server omits empty maps), and an
// empty type equals Opaque (the API server defaults it). Name and namespace
// are not compared: the caller looked cur up by them.
//
// Labels and annotations are compared first: a copy made from an older
// source version differs in its source-resource-version annotation, and
// is then found stale without digesting the source's data (pkg/copydigest)
// for every Cluster a source change reaches.
func SecretUpToDate(cur, want *corev1.Secret) bool {
	return metaEqual(cur, want) && secretContentEqual(cur, want)
}

// ConfigMapUpToDate is SecretUpToDate for ConfigMaps: data, binaryData,
// immutable, labels and annotations.
func ConfigMapUpToDate(cur, want *corev1.ConfigMap) bool {
	return metaEqual(cur, want) && configMapContentEqual(cur, want)
}

// SecretDataEqual reports whether two Secrets have the same type and data:
// what makes Fleet's own copy as good as Courier's (docs/design.md#fleets-own-copies).
func SecretDataEqual(cur, want *corev1.Secret) bool {
	return secretType(cur.Type) == secretType(want.Type) && copydigest.SecretDataEqual(cur.Data, want.Data)
}

// ConfigMapDataEqual reports whether two ConfigMaps have the same data and
// binaryData.
func ConfigMapDataEqual(cur, want *corev1.ConfigMap) bool {
	return copydigest.ConfigMapDataEqual(cur.Data, cur.BinaryData, want.Data, want.BinaryData)
}

// SecretNeedsRecreate reports whether the API server would refuse to Update
// cur into want, so the copy must be deleted and created instead: a Secret's
// type can never change, and an immutable Secret's data and immutable flag
// cannot change. It says nothing about whether an update is needed at all;
// ask SecretUpToDate first.
func SecretNeedsRecreate(cur, want *corev1.Secret) bool {
	if secretType(cur.Type) != secretType(want.Type) {
		return true
	}
	return isTrue(cur.Immutable) && !secretContentEqual(cur, want)
}

// ConfigMapNeedsRecreate reports whether cur is immutable and its data,
// binaryData or immutable flag differ from want, which the API server
// refuses to Update.
func ConfigMapNeedsRecreate(cur, want *corev1.ConfigMap) bool {
	return isTrue(cur.Immutable) && !configMapContentEqual(cur, want)
}

func secretContentEqual(cur, want *corev1.Secret) bool {
	return secretType(cur.Type) == secretType(want.Type) &&
		isTrue(cur.Immutable) == isTrue(want.Immutable) &&
		copydigest.SecretDataEqual(cur.Data, want.Data)
}

func configMapContentEqual(cur, want *corev1.ConfigMap) bool {
	return isTrue(cur.Immutable) == isTrue(want.Immutable) &&
		copydigest.ConfigMapDataEqual(cur.Data, cur.BinaryData, want.Data, want.BinaryData)
}

// metaEqual compares labels and annotations; maps.Equal treats nil and
// empty maps as equal. LegacyAnnotationCluster on cur is ignored unless
// want has it too (AdoptWriter): copies written before it was dropped are
// not rewritten only to remove it.
func metaEqual(cur, want metav1.Object) bool {
	return maps.Equal(cur.GetLabels(), want.GetLabels()) &&
		annotationsEqual(cur.GetAnnotations(), want.GetAnnotations())
}

func annotationsEqual(cur, want map[string]string) bool {
	_, legacy := cur[LegacyAnnotationCluster]
	if _, wanted := want[LegacyAnnotationCluster]; !legacy || wanted {
		return maps.Equal(cur, want)
	}
	if len(cur)-1 != len(want) {
		return false
	}
	for k, v := range want {
		if cv, ok := cur[k]; !ok || cv != v {
			return false
		}
	}
	return true
}

func secretType(t corev1.SecretType) corev1.SecretType {
	if t == "" {
		return corev1.SecretTypeOpaque
	}
	return t
}

func isTrue(b *bool) bool { return b != nil && *b }

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// cloneBytesMap deep-copies m, keeping nil as nil (bytes.Clone does too).
func cloneBytesMap(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}
