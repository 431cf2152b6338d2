package copyview

import "k8s.io/apimachinery/pkg/types"

// rowIndex files wanted rows under one value of theirs (their Cluster,
// the source they name), so that a change of that value finds its rows
// and their HelmOps without looking at any other row. Guarded by
// Controller.mu.
type rowIndex[V comparable] struct {
	rows  map[V]map[string]types.NamespacedName // value -> row key -> HelmOp
	value map[string]V                          // row key -> value
}

func newRowIndex[V comparable]() rowIndex[V] {
	return rowIndex[V]{rows: map[V]map[string]types.NamespacedName{}, value: map[string]V{}}
}

// set files the row key of HelmOp op under v, moving it from the value it
// had.
func (x rowIndex[V]) set(key string, v V, op types.NamespacedName) {
	if old, ok := x.value[key]; ok && old != v {
		x.remove(key)
	}
	m := x.rows[v]
	if m == nil {
		m = map[string]types.NamespacedName{}
		x.rows[v] = m
	}
	m[key] = op
	x.value[key] = v
}

// remove forgets a row.
func (x rowIndex[V]) remove(key string) {
	v, ok := x.value[key]
	if !ok {
		return
	}
	delete(x.value, key)
	if m := x.rows[v]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(x.rows, v)
		}
	}
}
