package fieldcopy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// get returns the value at p in obj. found is false when a key on the way
// is absent; err is set when the path runs into something that is not an
// object (a list, a string...), since paths address map keys only.
func get(obj map[string]any, p rules.Path) (value any, found bool, err error) {
	var cur any = obj
	for i, seg := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("%s is not an object", rules.Path(p[:i]).String())
		}
		cur, ok = m[seg]
		if !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// set stores a deep copy of value at p in obj, creating objects on the way.
// It fails, changing nothing, when the path runs into something that is
// not an object.
func set(obj map[string]any, p rules.Path, value any) error {
	m := obj
	for i, seg := range p[:len(p)-1] {
		next, ok := m[seg]
		if !ok || next == nil {
			// Once one object is created the rest of the path is new
			// objects, so nothing after this point can fail.
			created := map[string]any{}
			m[seg] = created
			m = created
			continue
		}
		nm, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is not an object", rules.Path(p[:i+1]).String())
		}
		m = nm
	}
	m[p[len(p)-1]] = runtime.DeepCopyJSONValue(value)
	return nil
}

// mergePatch applies patch onto target as a JSON merge patch (RFC 7386)
// and returns the result; neither argument is modified. Objects merge key
// by key, null deletes a key, anything else replaces.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return runtime.DeepCopyJSONValue(patch)
	}
	tm, ok := target.(map[string]any)
	out := map[string]any{}
	if ok {
		for k, v := range tm {
			out[k] = v
		}
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	// Values kept from target are shared, not copied: deep copy the result
	// so the caller owns it entirely.
	return runtime.DeepCopyJSONValue(out)
}

// sameValue reports whether a and b are the same JSON value, taking an
// object key holding null as absent: API servers drop such keys (a typed
// object's "creationTimestamp": null, for one), and treating them as a
// difference would rewrite the target on every pass.
func sameValue(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			if !sameValue(av, bm[k]) {
				return false
			}
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok && bv != nil {
				return false
			}
		}
		return true
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		if len(al) != len(bl) {
			return false
		}
		for i := range al {
			if !sameValue(al[i], bl[i]) {
				return false
			}
		}
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}
