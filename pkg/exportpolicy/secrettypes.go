package exportpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"golang.org/x/sync/singleflight"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// SecretTypes tells the view the types of the Secrets it watches as
// metadata only (a type is not metadata). A Secret's type cannot change
// once it is created (the API server refuses it), so each Secret is
// looked up once, by UID: a Secret listed by many rows, or changed every
// minute, costs one request for its life. Only listed Secrets are looked
// up, and the answer is asked for as a Table, whose cells hold the type
// and a count of keys: Courier's view never receives a Secret's data.
type SecretTypes struct {
	client rest.Interface
	reads  singleflight.Group

	mu    sync.Mutex
	byUID map[types.UID]corev1.SecretType
	// content is, by UID, whether the Secret at one resourceVersion holds
	// a kubeconfig with credentials (KubeconfigContent). Only the answer
	// is kept, never the data.
	content map[types.UID]contentVerdict
}

// contentVerdict is what is kept of one Secret's data at one version.
type contentVerdict struct {
	resourceVersion string
	kubeconfig      bool
}

// NewSecretTypes returns a lookup through client, a core/v1 REST client
// of the upstream cluster (kubernetes.Interface.CoreV1().RESTClient()).
func NewSecretTypes(client rest.Interface) *SecretTypes {
	return &SecretTypes{client: client, byUID: map[types.UID]corev1.SecretType{}, content: map[types.UID]contentVerdict{}}
}

// tableAccept asks the API server for a server-side Table (the form
// kubectl get uses) in place of the object.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// Type returns the type of Secret namespace/name whose UID is uid. It
// fails when the Secret read is not that object (deleted, or replaced
// meanwhile): the caller's metadata is then behind, and catches up.
func (t *SecretTypes) Type(ctx context.Context, namespace, name string, uid types.UID) (corev1.SecretType, error) {
	t.mu.Lock()
	st, ok := t.byUID[uid]
	t.mu.Unlock()
	if ok {
		return st, nil
	}
	v, err, _ := t.reads.Do(string(uid), func() (any, error) {
		st, got, err := t.read(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		if got != uid {
			return nil, fmt.Errorf("reading the type of Secret %s/%s: found UID %s, want %s (replaced meanwhile)", namespace, name, got, uid)
		}
		t.mu.Lock()
		t.byUID[uid] = st
		t.mu.Unlock()
		return st, nil
	})
	if err != nil {
		return "", err
	}
	return v.(corev1.SecretType), nil
}

// Forget drops what is known of a Secret that is gone.
func (t *SecretTypes) Forget(uid types.UID) {
	t.mu.Lock()
	delete(t.byUID, uid)
	delete(t.content, uid)
	t.mu.Unlock()
}

// KubeconfigContent reports whether Secret namespace/name (UID uid) at
// resourceVersion rv holds a kubeconfig carrying credentials
// (CarriesKubeconfig, rule kubeconfig-content). Unlike a type, data
// changes: the Secret is read in full once per resourceVersion, the
// answer kept and the data dropped at once. A read that finds another
// object or another version fails, as Type does: the caller's metadata is
// then behind, and catches up.
func (t *SecretTypes) KubeconfigContent(ctx context.Context, namespace, name string, uid types.UID, rv string) (bool, error) {
	t.mu.Lock()
	cv, ok := t.content[uid]
	t.mu.Unlock()
	if ok && cv.resourceVersion == rv {
		return cv.kubeconfig, nil
	}
	v, err, _ := t.reads.Do("content/"+string(uid)+"@"+rv, func() (any, error) {
		var s corev1.Secret
		if err := t.client.Get().Namespace(namespace).Resource("secrets").Name(name).Do(ctx).Into(&s); err != nil {
			return nil, err
		}
		if s.UID != uid {
			return nil, fmt.Errorf("reading Secret %s/%s: found UID %s, want %s (replaced meanwhile)", namespace, name, s.UID, uid)
		}
		found := CarriesKubeconfig(s.Data)
		if s.ResourceVersion != rv {
			// Changed meanwhile: the answer is for a version the caller
			// has not seen; it asks again when it does.
			return nil, fmt.Errorf("reading Secret %s/%s: found resourceVersion %s, want %s (changed meanwhile)", namespace, name, s.ResourceVersion, rv)
		}
		t.mu.Lock()
		t.content[uid] = contentVerdict{resourceVersion: rv, kubeconfig: found}
		t.mu.Unlock()
		return found, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// Len returns how many Secrets' types are held.
func (t *SecretTypes) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byUID)
}

// read GETs one Secret as a Table and returns its type and UID.
func (t *SecretTypes) read(ctx context.Context, namespace, name string) (corev1.SecretType, types.UID, error) {
	raw, err := t.client.Get().Namespace(namespace).Resource("secrets").Name(name).
		SetHeader("Accept", tableAccept).Do(ctx).Raw()
	if err != nil {
		return "", "", err
	}
	return typeFromTable(raw)
}

// typeFromTable reads a Secret's type and UID from its Table: the cell of
// the column named Type, and the row's object metadata.
func typeFromTable(raw []byte) (corev1.SecretType, types.UID, error) {
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return "", "", fmt.Errorf("decoding a Secret's table: %w", err)
	}
	if table.Kind != "Table" || len(table.Rows) != 1 {
		return "", "", fmt.Errorf("expected a Table of one row, got kind %q with %d rows", table.Kind, len(table.Rows))
	}
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Type" {
			col = i
		}
	}
	row := table.Rows[0]
	if col < 0 || col >= len(row.Cells) {
		return "", "", fmt.Errorf("the Secret's table has no Type column")
	}
	st, ok := row.Cells[col].(string)
	if !ok {
		return "", "", fmt.Errorf("the Secret's table has a Type cell of %T", row.Cells[col])
	}
	var m metav1.PartialObjectMetadata
	if len(row.Object.Raw) == 0 {
		return "", "", fmt.Errorf("the Secret's table row has no object metadata")
	}
	if err := json.Unmarshal(row.Object.Raw, &m); err != nil {
		return "", "", fmt.Errorf("decoding the Secret's table row metadata: %w", err)
	}
	return corev1.SecretType(st), m.UID, nil
}
