package downstream

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// foreignAccess returns a Client's MayHaveForeign and ForeignAt over the
// watch set's watch of Options.ForeignSelector's objects: answers that
// cannot tell (true, and not known) when there is no such watch.
func foreignAccess(w *watchSet, o Options) (func(kind, namespace, name string) bool, func(kind, namespace, name string) (metav1.Object, bool, bool)) {
	if o.ForeignSelector == nil {
		return func(string, string, string) bool { return false },
			func(string, string, string) (metav1.Object, bool, bool) { return nil, false, false }
	}
	fs, fc := w.foreignSecrets, w.foreignConfigMaps
	get := func(kind, namespace, name string) (metav1.Object, error) {
		if kind == "Secret" {
			return fs.Secrets(namespace).Get(name)
		}
		return fc.ConfigMaps(namespace).Get(name)
	}
	mayHave := func(kind, namespace, name string) bool {
		if !w.foreign.synced() {
			return true
		}
		_, err := get(kind, namespace, name)
		return !apierrors.IsNotFound(err)
	}
	at := func(kind, namespace, name string) (metav1.Object, bool, bool) {
		if !w.foreign.synced() {
			return nil, false, false
		}
		obj, err := get(kind, namespace, name)
		if err != nil {
			return nil, false, apierrors.IsNotFound(err)
		}
		return obj, true, true
	}
	return mayHave, at
}
