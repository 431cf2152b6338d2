package server

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/copysummary"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopysummary"
)

// summaries are the downstreamcopysummaries (docs/design.md#summaries): a store filled
// by a Summarizer that follows the row store, and the live reader of the
// sources' resourceVersions that reads by name are floored with. Data
// flows one way, rows → summarizer → summaries; every replica computes
// its own, as it computes its rows, and only now and then while nobody
// watches them there: every read first has the summarizer catch up.
type summaries struct {
	store      *memstore.Store[*courier.DownstreamCopySummary]
	summarizer *copysummary.Summarizer
	sources    sourceVersions
}

// newSummaries builds the summaries of rows, recomputed at most once per
// window, reading source versions upstream with config.
func newSummaries(config *rest.Config, rows *memstore.Store[*courier.DownstreamCopy], o *Options) (*summaries, error) {
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	store := memstore.New[*courier.DownstreamCopySummary]()
	return &summaries{
		store:      store,
		summarizer: copysummary.New(rows, store, copysummary.Options{Window: o.SummaryWindow}),
		sources:    sourceVersions{client: meta},
	}, nil
}

// config is what the API server serves them from.
func (s *summaries) config() apiserver.SummaryConfig {
	return apiserver.SummaryConfig{Store: s.store, Sources: s.sources, Syncer: s.summarizer}
}

// run computes the summaries until ctx is done.
func (s *summaries) run(ctx context.Context) {
	s.summarizer.Run(klog.NewContext(ctx, klog.Background().WithName("downstreamcopysummaries")))
}

// sourceVersions reads a source's resourceVersion with a metadata-only GET
// (PartialObjectMetadata): the reader never receives a Secret's data.
type sourceVersions struct {
	client metadata.Interface
}

var _ downstreamcopysummary.SourceVersions = sourceVersions{}

// SourceVersion implements downstreamcopysummary.SourceVersions. A kind
// other than Secret or ConfigMap names nothing Courier copies: it does not
// exist.
func (s sourceVersions) SourceVersion(ctx context.Context, namespace, kind, name string) (string, bool, error) {
	gvr := secretsGVR
	switch strings.ToLower(kind) {
	case "secret":
	case "configmap":
		gvr = configMapsGVR
	default:
		return "", false, nil
	}
	m, err := s.client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return m.ResourceVersion, true, nil
}
