package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/spf13/pflag"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy"
	"github.com/courier-dev/courier/pkg/fieldcopy/resources"
	"github.com/courier-dev/courier/pkg/memstore"
)

// FieldCopyOptions are the k8s-copier flags (docs/design.md#field-copies, docs/design.md#command-line). Kept apart
// from the rest of Options so that field copies wire in with few lines.
type FieldCopyOptions struct {
	// Targets are RESOURCE[.VERSION[.GROUP]] names of the kinds whose
	// objects may carry field-copy annotations. None: field copies are off.
	Targets []string
	// Namespaces limits field copies to these namespaces; empty means all.
	Namespaces []string
	// CrossNamespace allows sources outside the target's namespace.
	CrossNamespace bool
	// SecretSources allows rules whose source is a Secret; off by default
	// (docs/security.md#field-copies).
	SecretSources bool
}

// fieldCopyWorkers is how many targets are reconciled at once.
const fieldCopyWorkers = 2

// discoveryRefresh is the least time between two discovery refreshes
// caused by a name that is not found.
const discoveryRefresh = 5 * time.Second

// addFlags registers the field-copy flags.
func (f *FieldCopyOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Targets, "fieldcopy-target", f.Targets,
		"k8s-copier's --target: kinds whose objects may carry field-copy annotations, as RESOURCE[.VERSION[.GROUP]] (repeatable or comma-separated). None: field copies are off.")
	fs.StringSliceVar(&f.Namespaces, "fieldcopy-namespace", f.Namespaces,
		"k8s-copier's --namespace: limit field copies to targets in these namespaces (repeatable or comma-separated). Default: all namespaces.")
	fs.BoolVar(&f.CrossNamespace, "fieldcopy-cross-namespace", f.CrossNamespace,
		"Allow field copies to read sources outside the target's namespace (and cluster-scoped sources). Off by default: otherwise anyone who may annotate a target could read any object Courier can read.")
	fs.BoolVar(&f.SecretSources, "fieldcopy-secret-sources", f.SecretSources,
		"Allow field-copy rules whose source is a Secret. Off by default: Courier reads sources with its own rights and cannot see who wrote a rule, so this is safe only with the admission policy courier-fieldcopy-requires-get installed (artifacts/admission/, the chart sets both together). Sources the export rule denies are refused either way.")
}

// validate reports every malformed target and namespace.
func (f *FieldCopyOptions) validate() []error {
	var errs []error
	for _, t := range f.Targets {
		if _, _, err := resources.Parse(strings.TrimSpace(t)); err != nil {
			errs = append(errs, fmt.Errorf("--fieldcopy-target %q: %w", t, err))
		}
	}
	for _, ns := range f.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--fieldcopy-namespace %q: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if len(f.Targets) == 0 && (len(f.Namespaces) > 0 || f.CrossNamespace || f.SecretSources) {
		errs = append(errs, fmt.Errorf("--fieldcopy-namespace, --fieldcopy-cross-namespace and --fieldcopy-secret-sources need --fieldcopy-target"))
	}
	return errs
}

// newFieldCopies returns the field-copy controller, or nil when no
// --fieldcopy-target is set (the fieldcopies view then stays empty).
// With follower set (leader election on) it writes nothing until
// SetLeading(true). shared are the metadata-only informers over all
// namespaces that the views already run (Secrets, ConfigMaps): field
// copies watch those kinds through them rather than a second time.
//
// exports is the export rule that every source is judged by before a rule
// uses it (docs/design.md#export-safety).
func newFieldCopies(config *rest.Config, store *memstore.Store[*courier.FieldCopy], events record.EventBroadcaster, f FieldCopyOptions, follower bool,
	shared map[schema.GroupVersionResource]cache.SharedIndexInformer, exports *exportpolicy.Policy) (*fieldcopy.Controller, error) {
	if len(f.Targets) == 0 {
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	metaClient, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	targets := make([]string, 0, len(f.Targets))
	for _, t := range f.Targets {
		targets = append(targets, strings.TrimSpace(t))
	}
	return fieldcopy.NewController(fieldcopy.Config{
		Dynamic:        dyn,
		Metadata:       metaClient,
		Shared:         shared,
		Resolver:       resources.NewResolver(disc, discoveryRefresh),
		Store:          store,
		Targets:        targets,
		Namespaces:     f.Namespaces,
		CrossNamespace: f.CrossNamespace,
		SecretSources:  f.SecretSources,
		Exports:        exports,
		Recorder:       events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "courier-fieldcopy"}),
		Resync:         informerResync,
		Follower:       follower,
	}), nil
}

// startFieldCopies runs the controller, if any. Every replica computes
// rows; the leader election callbacks decide which one writes.
func startFieldCopies(ctx context.Context, c *fieldcopy.Controller) {
	if c == nil {
		return
	}
	go c.Run(klog.NewContext(ctx, klog.Background().WithName("fieldcopies")), fieldCopyWorkers)
}

// fieldCopiesReady reports whether the target watches have synced.
func fieldCopiesReady(c *fieldcopy.Controller) error {
	if c != nil && !c.Ready() {
		return fmt.Errorf("field-copy target informers have not synced yet")
	}
	return nil
}
