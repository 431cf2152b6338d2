package chaos

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/fleetsim"
)

const (
	badWS = "chaos-bad"
	fcNS  = "chaos-fc"
	// settleWithin bounds the wait for every case to show what a user sees.
	settleWithin = 3 * time.Minute
	// annotationsLimit is the kube-apiserver's limit on an object's
	// annotations, keys and values together.
	annotationsLimit = 256 << 10
)

var helmOpGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "helmops"}

// badCase is one row of the catalogue: what was given, how it is applied
// (an error is the kube-apiserver refusing it, which is what the user then
// sees), and how to read what the user sees once it has settled.
type badCase struct {
	group, name string
	apply       func(ctx context.Context) error
	// observe returns what a user sees and whether it has settled.
	observe func(ctx context.Context) (string, bool)
	// ok judges the settled outcome (nil: any clear outcome will do).
	ok func(seen string) bool

	refused string // the kube-apiserver's refusal
	seen    string
	settled bool
}

// badInput holds the clients and canaries of the catalogue.
type badInput struct {
	up     kubernetes.Interface
	dyn    dynamic.Interface
	f      *fleetRun
	canary string // the token of every kubeconfig here: no row may quote it
	cases  []*badCase
}

// testBadInput is scenario 4: at least 25 kinds of bad input, each
// applied, then read back as a user sees it (a row's phase and message, a
// refusal by the kube-apiserver, or, for an unparsable selector, no row
// and the Warning Event on the HelmOp). Courier's pid must never change;
// the simulated fleet and a well-formed HelmOp beside the bad ones must
// still sync.
func testBadInput(t *testing.T, f *fleetRun) {
	ctx := context.Background()
	pid := courier.Pid()
	b := &badInput{up: f.up, f: f, canary: "chaos-canary-" + randomHex(8)}
	var err error
	if b.dyn, err = dynamic.NewForConfig(env.Upstream.Config); err != nil {
		t.Fatal(err)
	}
	b.setup(t, ctx)
	b.helmOpCases(t)
	b.kubeconfigCases(t)
	b.fieldCopyCases(t)

	for _, c := range b.cases {
		if err := c.apply(ctx); err != nil {
			c.refused = "refused by the kube-apiserver: " + shorten(err.Error(), 160)
			c.seen, c.settled = c.refused, true
		}
	}
	deadline := time.Now().Add(settleWithin)
	for {
		pending := 0
		for _, c := range b.cases {
			if c.settled {
				continue
			}
			if c.seen, c.settled = c.observe(ctx); !c.settled {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // a polling interval; every case waits on what it observes
	}

	// Positive control: the fleet still syncs (one source, every Cluster),
	// and so does the well-formed HelmOp beside the bad ones.
	t0 := f.change1(t, "control")
	lat, err := f.w.Wait(f.keys1("control"), t0, f.budget())
	results.add(t, "4 bad input", fmt.Sprintf("positive control: a source change reaches all %d Clusters of the fleet during the catalogue", f.n),
		errOr(err, "last copy after "+ms(fleetsim.MaxDuration(lat))), "all", err == nil)

	quoted := 0
	for _, c := range b.cases {
		ok := c.settled && c.seen != ""
		if ok && c.ok != nil {
			ok = c.ok(c.seen)
		}
		if strings.Contains(c.seen, b.canary) {
			quoted++
		}
		results.add(t, "4 bad input", c.group+": "+c.name, c.seen, "settled, clear", ok)
	}
	results.add(t, "4 bad input", "cases", fmt.Sprint(len(b.cases)), ">= 25", len(b.cases) >= 25)
	results.add(t, "4 bad input", "outcomes quoting a kubeconfig's token", fmt.Sprint(quoted), "0", quoted == 0)
	now := courier.Pid()
	results.add(t, "4 bad input", "Courier's pid before / after the catalogue", fmt.Sprintf("%d / %d", pid, now), "same, running", pid != 0 && pid == now)
}

// change1 sets the first listed source to value.
func (f *fleetRun) change1(t *testing.T, value string) time.Time {
	t.Helper()
	t0, err := fleetsim.UpdateSources(context.Background(), f.up, workspace, f.listed[:1], roundKey, value)
	if err != nil {
		t.Fatal(err)
	}
	return t0
}

// keys1 are the arrivals of value of the first listed source.
func (f *fleetRun) keys1(value string) []fleetsim.ArrivalKey {
	var out []fleetsim.ArrivalKey
	for i := 1; i <= f.n; i++ {
		out = append(out, fleetsim.ArrivalKey{NS: dest(i), Name: f.listed[0], Value: value})
	}
	return out
}

// setup: the bad workspace with a good Cluster (downstream-1) and a
// source; the field-copy namespace where Courier may update ConfigMaps.
func (b *badInput) setup(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, ns := range []string{badWS, fcNS} {
		if _, err := b.up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := os.ReadFile(env.Downstreams[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	b.mustCluster(t, ctx, "good", map[string]string{"set": "good"}, "good-kubeconfig", "", kc)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "src"}, StringData: map[string]string{"k": "v"}},
		{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("s", 253)}, StringData: map[string]string{"k": "v"}},
	} {
		if _, err := b.up.CoreV1().Secrets(badWS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.up.CoreV1().Secrets(fcNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fc-src"},
		StringData: map[string]string{"a": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.up.RbacV1().Roles(fcNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "courier-fieldcopy"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.up.RbacV1().RoleBindings(fcNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "courier-fieldcopy"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "courier", Namespace: "courier-system"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "courier-fieldcopy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (b *badInput) mustCluster(t *testing.T, ctx context.Context, name string, labels map[string]string, secret, secretNS string, kubeconfig []byte) {
	t.Helper()
	if err := b.cluster(ctx, name, labels, secret, secretNS, kubeconfig); err != nil {
		t.Fatal(err)
	}
}

// cluster creates a Cluster and, unless kubeconfig is nil, its Secret
// (key "value").
func (b *badInput) cluster(ctx context.Context, name string, labels map[string]string, secret, secretNS string, kubeconfig []byte) error {
	if kubeconfig != nil {
		ns := secretNS
		if ns == "" {
			ns = badWS
		}
		if _, err := b.up.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
			Data: map[string][]byte{"value": kubeconfig}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	_, err := b.f.fc.FleetV1alpha1().Clusters(badWS).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: fleet.ClusterSpec{KubeConfigSecret: secret, KubeConfigSecretNamespace: secretNS}}, metav1.CreateOptions{})
	return err
}

// rows summarizes the rows matching fieldSelector in the bad workspace:
// "<phase> xN: <message>" per phase; settled once there is a row and none
// is Pending.
func (b *badInput) rows(ctx context.Context, fieldSelector string) (string, bool) {
	list, err := b.f.fc.CourierV1alpha1().DownstreamCopies(badWS).List(ctx, metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		return err.Error(), false
	}
	if len(list.Items) == 0 {
		return "no row", false
	}
	count := map[courierv1alpha1.CopyPhase]int{}
	msg := map[courierv1alpha1.CopyPhase]string{}
	settled := true
	for _, r := range list.Items {
		count[r.Status.Phase]++
		if msg[r.Status.Phase] == "" {
			msg[r.Status.Phase] = r.Status.Message
		}
		if r.Status.Phase == "" || r.Status.Phase == courierv1alpha1.CopyPhasePending {
			settled = false
		}
	}
	var parts []string
	for p, n := range count {
		s := string(p)
		if len(list.Items) > 1 {
			s += fmt.Sprintf(" x%d", n)
		}
		if msg[p] != "" {
			s += ": " + shorten(msg[p], 200)
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, phaseSep), settled
}

// phaseSep separates the phases of one outcome (messages hold "; ").
const phaseSep = " ‖ "

// helmOpRows observes the rows of one HelmOp.
func (b *badInput) helmOpRows(name string) func(context.Context) (string, bool) {
	return func(ctx context.Context) (string, bool) { return b.rows(ctx, "spec.helmOp="+name) }
}

// phaseIs accepts an outcome whose rows are all of phase.
func phaseIs(phase courierv1alpha1.CopyPhase) func(string) bool {
	return func(seen string) bool {
		return strings.HasPrefix(seen, string(phase)+":") && !strings.Contains(seen, phaseSep)
	}
}

func refused(seen string) bool { return strings.HasPrefix(seen, "refused by the kube-apiserver") }

// typed adds a case applying a HelmOp.
func (b *badInput) typed(group, name string, op *fleet.HelmOp, ok func(string) bool) {
	op.Namespace = badWS
	b.cases = append(b.cases, &badCase{group: group, name: name, ok: ok,
		apply: func(ctx context.Context) error {
			_, err := b.f.fc.FleetV1alpha1().HelmOps(badWS).Create(ctx, op, metav1.CreateOptions{})
			return err
		},
		observe: b.helmOpRows(op.Name)})
}

// raw adds a case applying a HelmOp written as JSON, for wrong types.
func (b *badInput) raw(group, name, opName, spec string) {
	b.cases = append(b.cases, &badCase{group: group, name: name, ok: refused,
		apply: func(ctx context.Context) error {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal([]byte(`{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"HelmOp","metadata":{"name":"`+opName+`"},"spec":`+spec+`}`), &u.Object); err != nil {
				return fmt.Errorf("test bug: %w", err)
			}
			_, err := b.dyn.Resource(helmOpGVR).Namespace(badWS).Create(ctx, u, metav1.CreateOptions{})
			return err
		},
		observe: b.helmOpRows(opName)})
}

// warned observes a HelmOp with a target whose selector does not parse:
// such a target has no row to show it on, so what a user sees is the
// Warning Event Courier records on the HelmOp, once (and the rows of the
// HelmOp's valid target).
func (b *badInput) warned(opName string) func(context.Context) (string, bool) {
	return func(ctx context.Context) (string, bool) {
		rows, settled := b.rows(ctx, "spec.helmOp="+opName)
		list, err := b.up.CoreV1().Events(badWS).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=HelmOp,involvedObject.name=" + opName + ",type=Warning"})
		if err != nil {
			return err.Error(), false
		}
		if len(list.Items) == 0 {
			return "no Event yet; rows: " + rows, false
		}
		var parts []string
		for _, e := range list.Items {
			parts = append(parts, fmt.Sprintf("%s (count %d): %s", e.Reason, max(e.Count, 1), shorten(e.Message, 220)))
		}
		sort.Strings(parts)
		return "no row for the target; Warning Event on the HelmOp: " + strings.Join(parts, " | ") + "; the valid target's row: " + rows, settled
	}
}

// warnedOK accepts one InvalidTarget Event, recorded once, beside a valid
// target that synced.
func warnedOK(seen string) bool {
	return strings.HasPrefix(seen, "no row for the target; Warning Event on the HelmOp: InvalidTarget (count 1): ") &&
		!strings.Contains(seen, " | ") && strings.HasSuffix(seen, "row: Synced: the copy matches its source")
}

func op(name string, res []fleet.DownstreamResource, targets ...fleet.BundleTarget) *fleet.HelmOp {
	o := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: name}}
	o.Spec.DownstreamResources = res
	// Each HelmOp its own destination: two HelmOps writing one object would
	// make one of them Conflict.
	o.Spec.TargetNamespace = destFor(name)
	o.Spec.Targets = targets
	if len(targets) == 0 {
		o.Spec.Targets = []fleet.BundleTarget{{ClusterName: "good"}}
	}
	return o
}

// destFor is the destination namespace of the HelmOp name: "bad-" and
// its name, or a short hash of it when that is no valid namespace name.
func destFor(name string) string {
	if ns := "bad-" + name; len(ns) <= 63 {
		return ns
	}
	return fmt.Sprintf("bad-%x", sha256.Sum256([]byte(name)))[:20]
}

func secretRes(names ...string) []fleet.DownstreamResource {
	var out []fleet.DownstreamResource
	for _, n := range names {
		out = append(out, fleet.DownstreamResource{Kind: "Secret", Name: n})
	}
	return out
}

func (b *badInput) helmOpCases(t *testing.T) {
	const g = "HelmOp"
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("missing-%04d", i))
	}
	many[0] = "src"
	b.typed(g, "1,000 listed resources (one exists)", op("many", secretRes(many...)), func(s string) bool {
		return strings.Contains(s, "SourceMissing x999") && strings.Contains(s, "Synced x1")
	})
	b.typed(g, "HelmOp name of 253 characters", op(strings.Repeat("h", 253), secretRes("src")), phaseIs(courierv1alpha1.CopyPhaseSynced))
	b.typed(g, "listed Secret name of 253 characters", op("long-source", secretRes(strings.Repeat("s", 253))), phaseIs(courierv1alpha1.CopyPhaseSynced))
	o := op("ns-63", secretRes("src"))
	o.Spec.TargetNamespace = strings.Repeat("n", 63)
	b.typed(g, "destination namespace of 63 characters", o, phaseIs(courierv1alpha1.CopyPhaseSynced))
	o = op("ns-64", secretRes("src"))
	o.Spec.TargetNamespace = strings.Repeat("n", 64)
	b.typed(g, "destination namespace of 64 characters", o, phaseIs(courierv1alpha1.CopyPhaseInvalid))
	o = op("ns-invalid", secretRes("src"))
	o.Spec.TargetNamespace = "Not_A_Namespace"
	b.typed(g, "destination namespace that is no DNS label", o, phaseIs(courierv1alpha1.CopyPhaseInvalid))
	b.typed(g, "duplicate entries (Secret/src, secret/src, Secret/src)", op("dupes",
		[]fleet.DownstreamResource{{Kind: "Secret", Name: "src"}, {Kind: "secret", Name: "src"}, {Kind: "Secret", Name: "src"}}),
		func(s string) bool { return s != "" && !strings.Contains(s, " x") && strings.HasPrefix(s, "Synced") })
	b.typed(g, "kind Deployment", op("kind-deployment", []fleet.DownstreamResource{{Kind: "Deployment", Name: "src"}}), phaseIs(courierv1alpha1.CopyPhaseInvalid))
	b.typed(g, "empty kind", op("kind-empty", []fleet.DownstreamResource{{Kind: "", Name: "src"}}), phaseIs(courierv1alpha1.CopyPhaseInvalid))
	b.typed(g, "empty name", op("name-empty", []fleet.DownstreamResource{{Kind: "Secret", Name: ""}}), phaseIs(courierv1alpha1.CopyPhaseInvalid))
	b.typed(g, "name that is no object name (Not_Valid)", op("name-invalid", secretRes("Not_Valid")), phaseIs(courierv1alpha1.CopyPhaseSourceMissing))

	const w = "wrong JSON type"
	b.raw(w, "downstreamResources a string", "wrong-list", `{"downstreamResources":"src"}`)
	b.raw(w, "keepResources a string", "wrong-bool", `{"keepResources":"yes","downstreamResources":[{"kind":"Secret","name":"src"}]}`)
	b.raw(w, "downstreamResources[0].name a number", "wrong-name", `{"downstreamResources":[{"kind":"Secret","name":42}]}`)
	b.raw(w, "targets an object", "wrong-targets", `{"targets":{"clusterName":"good"}}`)
	b.raw(w, "clusterSelector.matchLabels a string", "wrong-selector", `{"targets":[{"clusterSelector":{"matchLabels":"env=prod"}}]}`)

	const s = "selector that does not parse"
	for _, c := range []struct {
		name, op string
		target   fleet.BundleTarget
	}{
		{"clusterSelector operator Foo", "sel-operator", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "set", Operator: "Foo", Values: []string{"good"}}}}}},
		{"clusterSelector key with a space", "sel-key", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}}}},
		{"clusterSelector In without values", "sel-in", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "set", Operator: metav1.LabelSelectorOpIn}}}}},
		{"clusterGroupSelector value of 64 characters", "sel-group", fleet.BundleTarget{ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": strings.Repeat("v", 64)}}}},
	} {
		o := op(c.op, secretRes("src"), c.target, fleet.BundleTarget{ClusterName: "good"})
		o.Namespace = badWS
		b.cases = append(b.cases, &badCase{group: s, name: c.name + " (beside a valid target)",
			apply: func(ctx context.Context) error {
				_, err := b.f.fc.FleetV1alpha1().HelmOps(badWS).Create(ctx, o, metav1.CreateOptions{})
				return err
			},
			observe: b.warned(c.op), ok: warnedOK})
	}
	grp := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-group", Namespace: badWS}, Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "set", Operator: "Exists", Values: []string{"x"}}}}}}
	gop := op("sel-clustergroup", secretRes("src"), fleet.BundleTarget{ClusterGroup: "bad-group"}, fleet.BundleTarget{ClusterName: "good"})
	gop.Namespace = badWS
	b.cases = append(b.cases, &badCase{group: s, name: "ClusterGroup spec.selector Exists with values",
		apply: func(ctx context.Context) error {
			if _, err := b.f.fc.FleetV1alpha1().ClusterGroups(badWS).Create(ctx, grp, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := b.f.fc.FleetV1alpha1().HelmOps(badWS).Create(ctx, gop, metav1.CreateOptions{})
			return err
		},
		observe: b.warned("sel-clustergroup"), ok: warnedOK})
}

// kubeconfig builds a kubeconfig for server with the canary token; mutate
// changes it before it is written.
func (b *badInput) kubeconfig(server string, ca []byte, mutate func(*clientcmdapi.Config)) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: b.canary}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	if mutate != nil {
		mutate(cfg)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(err)
	}
	return data
}

func (b *badInput) kubeconfigCases(t *testing.T) {
	const g = "kubeconfig"
	ds1, ds2 := env.Downstreams[0], env.Downstreams[1]
	expired := expiredServer(t)
	closed := closedPort(t)
	type kc struct {
		name     string
		secret   string // "" = no Secret
		secretNS string
		data     []byte
	}
	cases := []kc{
		{"Secret missing", "", "", nil},
		{"Secret without the key value", "no-key", "", nil},
		{"empty", "empty", "", []byte{}},
		{"not YAML", "not-yaml", "", []byte("{{{ this: is [not yaml")},
		{"exec credential plugin", "exec", "", b.kubeconfig(ds1.URL, ds1.Config.CAData, func(c *clientcmdapi.Config) {
			c.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "echo pwned"}, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
		})},
		{"auth-provider plugin", "auth-provider", "", b.kubeconfig(ds1.URL, ds1.Config.CAData, func(c *clientcmdapi.Config) {
			c.AuthInfos["u"] = &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": b.canary}}}
		})},
		{"tokenFile path", "token-file", "", b.kubeconfig(ds1.URL, ds1.Config.CAData, func(c *clientcmdapi.Config) {
			c.AuthInfos["u"] = &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}
		})},
		{"client-certificate file path", "cert-file", "", b.kubeconfig(ds1.URL, ds1.Config.CAData, func(c *clientcmdapi.Config) {
			c.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificate: "/etc/ssl/cert.pem", ClientKey: "/etc/ssl/key.pem"}
		})},
		{"certificate-authority file path", "ca-file", "", b.kubeconfig(ds1.URL, nil, func(c *clientcmdapi.Config) {
			c.Clusters["c"].CertificateAuthority = "/etc/ssl/certs/ca-certificates.crt"
		})},
		{"server on a closed port", "closed-port", "", b.kubeconfig(closed, ds1.Config.CAData, nil)},
		{"server with an expired certificate", "expired-cert", "", b.kubeconfig(expired.url, expired.caPEM, nil)},
		{"server certificate from another CA", "wrong-ca", "", b.kubeconfig(ds1.URL, ds2.Config.CAData, nil)},
		{"token the server does not know", "wrong-token", "", b.kubeconfig(ds1.URL, ds1.Config.CAData, nil)},
		{"server URL that does not parse", "bad-url", "", b.kubeconfig("https://[::1", ds1.Config.CAData, nil)},
		{"Secret in a namespace Courier may not read (kube-system)", "elsewhere", "kube-system", b.kubeconfig(ds1.URL, ds1.Config.CAData, nil)},
	}
	// One HelmOp selects every Cluster below (applied with the first case).
	kcOp := op("kc", secretRes("src"), fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "kc"}}})
	kcOp.Namespace = badWS
	for i, c := range cases {
		name := fmt.Sprintf("kc-%02d", i)
		secret := c.secret
		if secret == "" {
			secret = "absent"
		}
		b.cases = append(b.cases, &badCase{group: g, name: c.name,
			apply: func(ctx context.Context) error {
				if i == 0 {
					if _, err := b.f.fc.FleetV1alpha1().HelmOps(badWS).Create(ctx, kcOp, metav1.CreateOptions{}); err != nil {
						return fmt.Errorf("the HelmOp of the kubeconfig cases: %w", err)
					}
				}
				data := c.data
				if c.secret == "no-key" {
					if _, err := b.up.CoreV1().Secrets(badWS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
						Data: map[string][]byte{"kubeconfig": b.kubeconfig(ds1.URL, ds1.Config.CAData, nil)}}, metav1.CreateOptions{}); err != nil {
						return err
					}
				} else if c.secret != "" && data == nil {
					data = []byte{}
				}
				if c.secret == "" || c.secret == "no-key" {
					data = nil
				}
				return b.cluster(ctx, name, map[string]string{"set": "kc"}, secret, c.secretNS, data)
			},
			observe: func(ctx context.Context) (string, bool) { return b.rows(ctx, "spec.cluster="+name) },
			ok:      phaseIs(courierv1alpha1.CopyPhaseUnreachable),
		})
	}
	// A Cluster name at the limit, with a good kubeconfig: it must sync.
	long := strings.Repeat("c", 253)
	kc1, err := os.ReadFile(ds1.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	b.cases = append(b.cases, &badCase{group: g, name: "Cluster name of 253 characters (good kubeconfig)",
		apply: func(ctx context.Context) error {
			return b.cluster(ctx, long, map[string]string{"set": "kc"}, "long-cluster", "", kc1)
		},
		observe: func(ctx context.Context) (string, bool) { return b.rows(ctx, "spec.cluster="+long) },
		ok:      phaseIs(courierv1alpha1.CopyPhaseSynced),
	})
}

func (b *badInput) fieldCopyCases(t *testing.T) {
	const g = "field copy"
	add := func(name, cm string, annotations map[string]string, ok func(string) bool) {
		b.cases = append(b.cases, &badCase{group: g, name: name, ok: ok,
			apply: func(ctx context.Context) error {
				_, err := b.up.CoreV1().ConfigMaps(fcNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Annotations: annotations}}, metav1.CreateOptions{})
				return err
			},
			observe: b.fieldCopyRows(cm)})
	}
	key := "k8s-copier.fig.org/replace-data.big"
	fill := annotationsLimit - len(key) - len(`json:""`)
	add("annotations at the size limit (256 KiB, a json literal)", "at-limit",
		map[string]string{key: `json:"` + strings.Repeat("x", fill) + `"`}, fcPhase("Applied"))
	add("annotations one byte over the size limit", "over-limit",
		map[string]string{key: `json:"` + strings.Repeat("x", fill+1) + `"`}, refused)
	deep := "data." + strings.Repeat("a.", 5000) + "a"
	add("destination path 5,000 levels deep (courier.dev/field-copies)", "deep-path",
		map[string]string{"courier.dev/field-copies": `[{"to":"` + deep + `","from":"json:\"x\""}]`}, fcPhase("Invalid"))
	add("json literal nested 20,000 levels", "deep-json",
		map[string]string{"k8s-copier.fig.org/replace-data.x": "json:" + strings.Repeat("[", 20000) + strings.Repeat("]", 20000)}, fcPhase("Invalid"))
	add("source path with an unclosed bracket", "bracket",
		map[string]string{"k8s-copier.fig.org/replace-data.x": "secret:fc-src:data[a"}, fcPhase("Invalid"))
	add("source of a resource that does not exist", "no-resource",
		map[string]string{"k8s-copier.fig.org/replace-data.x": "nosuchresource:fc-src:data.a"}, fcPhase("Invalid"))
	add("source in another namespace (no --fieldcopy-cross-namespace)", "cross-ns",
		map[string]string{"k8s-copier.fig.org/replace-data.x": "secret:kube-system/x:data.a"}, fcPhase("Refused"))
	// Invalid UTF-8 cannot be sent through client-go (its JSON encoder
	// replaces it), so this body is written by hand.
	b.cases = append(b.cases, &badCase{group: g, name: "invalid UTF-8 in an annotation value",
		apply: func(ctx context.Context) error {
			body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"utf8","annotations":{"k8s-copier.fig.org/replace-data.x":"json:\"` + "\xff\xfe" + `\""}}}`)
			return b.up.CoreV1().RESTClient().Post().Namespace(fcNS).Resource("configmaps").Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		},
		observe: b.fieldCopyRows("utf8")})
}

// fcPhase accepts a FieldCopy outcome of one of phases.
func fcPhase(phases ...string) func(string) bool {
	return func(seen string) bool {
		for _, p := range phases {
			if strings.HasPrefix(seen, p+":") || seen == p {
				return true
			}
		}
		return false
	}
}

// fieldCopyRows observes the FieldCopy rows of the ConfigMap cm.
func (b *badInput) fieldCopyRows(cm string) func(context.Context) (string, bool) {
	return func(ctx context.Context) (string, bool) {
		list, err := b.f.fc.CourierV1alpha1().FieldCopies(fcNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error(), false
		}
		var parts []string
		for _, r := range list.Items {
			if r.Spec.Target.Name != cm {
				continue
			}
			if r.Status.Phase == "" {
				return "row without a phase", false
			}
			s := string(r.Status.Phase)
			if r.Status.Message != "" {
				s += ": " + shorten(r.Status.Message, 200)
			}
			parts = append(parts, s)
		}
		if len(parts) == 0 {
			return "no row", false
		}
		sort.Strings(parts)
		return strings.Join(parts, "; "), true
	}
}

// server is a TLS server with an expired certificate.
type server struct {
	url   string
	caPEM []byte
}

func expiredServer(t *testing.T) server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	// Courier's refusals of the certificate are the point: not news.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return server{url: s.URL, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// closedPort is an https URL on a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + l.Addr().String()
	l.Close()
	return url
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
