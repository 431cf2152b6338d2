// Package apiserver assembles Courier's aggregated API server: the generic
// server from k8s.io/apiserver, with no etcd of its own, serving the computed
// courier.dev resources from the stores their producers fill, lists of them
// written from each row's cached encoding (listencoding.go), and pull
// delivery's subresources of downstreamcopies (docs/design.md#pull-delivery): payload, read
// from upstream when an agent asks, and status, where agents report.
package apiserver

import (
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/courier-dev/courier/pkg/agentwatch"
	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopysummary"
	"github.com/courier-dev/courier/pkg/registry/courier/fieldcopy"
)

// ExtraConfig holds what Courier adds to the generic server configuration:
// the stores the views are served from, and what the payload subresource
// needs. Whoever computes the rows writes them into these stores; the
// server only reads them.
type ExtraConfig struct {
	DownstreamCopies *memstore.Store[*courier.DownstreamCopy]
	FieldCopies      *memstore.Store[*courier.FieldCopy]
	Payloads         PayloadConfig
	Summaries        SummaryConfig
	// DeliveredBy fills the Delivered-By column of downstreamcopies'
	// tables (who writes the row's Cluster); nil leaves it empty.
	DeliveredBy downstreamcopy.DeliveredBy
}

// SummaryConfig is what downstreamcopysummaries are served from (docs/design.md#summaries):
// the store pkg/copysummary fills from the rows, and the upstream
// reader of the sources' current resourceVersions that reads by name are
// floored with, and what brings the store up to the rows before a read.
type SummaryConfig struct {
	Store   *memstore.Store[*courier.DownstreamCopySummary]
	Sources downstreamcopysummary.SourceVersions
	// Syncer is the summarizer that fills Store; nil serves Store as it
	// is.
	Syncer downstreamcopysummary.Syncer
}

// PayloadConfig is what the pull-delivery subresources need (docs/design.md#pull-delivery):
// downstreamcopies/<row>/payload is made from it, and
// downstreamcopies/<row>/status records into it.
type PayloadConfig struct {
	// Sources reads the upstream sources in full.
	Sources downstreamcopy.Sources
	// Agents tells who is the agent of a Cluster: only that user is
	// served its Cluster's payloads.
	Agents downstreamcopy.AgentChecker
	// UpstreamID goes into every payload's owner label and
	// courier.dev/upstream annotation, as on every copy Courier pushes.
	UpstreamID string
	// Exports refuses every source that may never be exported
	// (exportpolicy.Policy.Guard), whatever its row says; nil refuses none.
	Exports func(runtime.Object) error
	// Reports keeps what agents report to downstreamcopies/<row>/status;
	// Agents decides who may.
	Reports downstreamcopy.Reporter
	// Notes is told an agent's new note on a Denied row (nil: nobody).
	Notes downstreamcopy.DeniedNotes
}

// Config is the configuration of a Courier API server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig is a Config on which Complete has been called. Its only
// field is private, so New cannot be reached without Complete.
type CompletedConfig struct {
	*completedConfig
}

// CourierServer is the running aggregated API server.
type CourierServer struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the fields of the generic configuration that depend on
// others and returns a configuration New accepts.
func (cfg *Config) Complete() CompletedConfig {
	c := completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		ExtraConfig:   &cfg.ExtraConfig,
	}
	return CompletedConfig{&c}
}

// New returns a Courier API server with the courier.dev group installed.
func (c completedConfig) New() (*CourierServer, error) {
	if c.ExtraConfig.DownstreamCopies == nil || c.ExtraConfig.FieldCopies == nil || c.ExtraConfig.Summaries.Store == nil {
		return nil, fmt.Errorf("courier apiserver: every view store must be set")
	}
	if c.ExtraConfig.Summaries.Sources == nil {
		return nil, fmt.Errorf("courier apiserver: downstreamcopysummaries need a reader of the sources' versions")
	}
	p := c.ExtraConfig.Payloads
	if p.Sources == nil || p.Agents == nil || p.UpstreamID == "" || p.Reports == nil {
		return nil, fmt.Errorf("courier apiserver: pull delivery needs sources, agents, the upstream id and a report store")
	}
	serializer := newRowEncodings(Codecs)
	rows := downstreamcopy.NewREST(c.ExtraConfig.DownstreamCopies, c.ExtraConfig.DeliveredBy)
	if err := c.serveAgentWatches(rows, serializer); err != nil {
		return nil, err
	}
	generic, err := c.GenericConfig.New("courier-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	info := genericapiserver.NewDefaultAPIGroupInfo(courier.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	info.NegotiatedSerializer = serializer
	info.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"downstreamcopies":         rows,
		"downstreamcopies/payload": downstreamcopy.NewPayloadREST(c.ExtraConfig.DownstreamCopies, p.Sources, p.Agents, p.UpstreamID, p.Exports),
		"downstreamcopies/status":  downstreamcopy.NewStatusREST(c.ExtraConfig.DownstreamCopies, p.Agents, p.Reports, p.Notes),
		"fieldcopies":              fieldcopy.NewREST(c.ExtraConfig.FieldCopies),
		"downstreamcopysummaries":  downstreamcopysummary.NewREST(c.ExtraConfig.Summaries.Store, c.ExtraConfig.Summaries.Sources, c.ExtraConfig.Summaries.Syncer),
	}
	if err := generic.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("installing %s: %w", courier.GroupName, err)
	}
	return &CourierServer{GenericAPIServer: generic}, nil
}

// serveAgentWatches puts pkg/agentwatch in front of the generic server's
// director: it serves the watches of one Cluster's rows (every
// courier-agent's, docs/design.md#pull-delivery) from rows, encoded by serializer as the
// generic handler would, with a smaller stack per watch. It must run
// before the generic server is made, which builds its handler chain.
func (c completedConfig) serveAgentWatches(rows rest.Watcher, serializer runtime.NegotiatedSerializer) error {
	kind := v1alpha1.SchemeGroupVersion.WithKind("DownstreamCopy")
	watches, err := agentwatch.New(agentwatch.Config{
		Resource:   v1alpha1.SchemeGroupVersion.WithResource("downstreamcopies"),
		IndexField: downstreamcopy.WatchIndexField,
		Watcher:    rows,
		Serializer: serializer,
		ConvertFieldLabel: func(label, value string) (string, string, error) {
			return Scheme.ConvertFieldLabel(kind, label, value)
		},
		MinRequestTimeout: time.Duration(c.GenericConfig.MinRequestTimeout) * time.Second,
	})
	if err != nil {
		return err
	}
	chain := c.GenericConfig.BuildHandlerChainFunc
	c.GenericConfig.BuildHandlerChainFunc = func(director http.Handler, gc *genericapiserver.Config) http.Handler {
		return chain(watches.Wrap(director), gc)
	}
	return nil
}
