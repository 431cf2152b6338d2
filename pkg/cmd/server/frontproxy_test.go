package server

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/courier-dev/courier/pkg/pki"
)

// caProvider is a CAContentProvider whose bundle is loaded or not.
type caProvider struct{ loaded bool }

var _ dynamiccertificates.CAContentProvider = caProvider{}

func (caProvider) Name() string                                { return "front-proxy" }
func (p caProvider) CurrentCABundleContent() []byte            { return nil }
func (caProvider) AddListener(dynamiccertificates.Listener)    {}
func (p caProvider) VerifyOptions() (x509.VerifyOptions, bool) { return x509.VerifyOptions{}, p.loaded }
func headers(names ...string) headerrequest.StringSliceProvider {
	return headerrequest.StaticStringSlice(names)
}

func TestFrontProxyReadyCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *authenticatorfactory.RequestHeaderConfig
		want string // "" when ready
	}{
		{name: "aggregator not authenticated at all", cfg: nil},
		{name: "CA and headers loaded", cfg: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider: caProvider{loaded: true}, UsernameHeaders: headers("X-Remote-User")}},
		{name: "CA not loaded", want: "front-proxy client CA", cfg: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider: caProvider{}, UsernameHeaders: headers("X-Remote-User")}},
		{name: "headers not loaded", want: "front-proxy user headers", cfg: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider: caProvider{loaded: true}, UsernameHeaders: headers()}},
		{name: "no header provider", want: "front-proxy user headers", cfg: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider: caProvider{loaded: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := frontProxyReadyCheck(tc.cfg)
			if check.Name() != "courier-front-proxy-trusted" {
				t.Errorf("name = %q", check.Name())
			}
			err := check.Check(nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("not ready: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("ready, want an error holding %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not hold %q", err, tc.want)
			}
		})
	}
}

// TestFrontProxyReadyAfterInformerSync drives k8s.io/apiserver's own
// controllers as a starting server does: RunOnce (all that runs before
// serving begins) leaves the CA unloaded, so the check holds readiness
// back; once the controllers run, it passes. If the first assertion ever
// fails, k8s.io/apiserver loads the CA before serving and the check is a
// harmless second guard.
func TestFrontProxyReadyAfterInformerSync(t *testing.T) {
	ca, err := pki.NewCA("front-proxy-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client := kubefake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(ca.CertPEM),
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
			"requestheader-allowed-names":        `["front-proxy-client"]`,
		},
	})
	caController, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca",
		"kube-system", "extension-apiserver-authentication", "requestheader-client-ca-file", client)
	if err != nil {
		t.Fatal(err)
	}
	headerController := headerrequest.NewRequestHeaderAuthRequestController("extension-apiserver-authentication", "kube-system", client,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	check := frontProxyReadyCheck(&authenticatorfactory.RequestHeaderConfig{
		CAContentProvider: caController,
		UsernameHeaders:   headerrequest.StringSliceProviderFunc(headerController.UsernameHeaders),
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := caController.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := headerController.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := check.Check(nil); err == nil || !strings.Contains(err.Error(), "front-proxy client CA") {
		t.Fatalf("after RunOnce only, the check = %v; want the CA not loaded", err)
	}

	go caController.Run(ctx, 1)
	go headerController.Run(ctx, 1)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = check.Check(nil)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("not ready after the controllers ran: %v", last)
	}
}
