// Package delivery decides how a Fleet Cluster's copies reach it: pulled
// by its own courier-agent, or pushed through its kubeconfig
// (docs/design.md#pull-delivery). It is the one reader of the
// courier.dev/agent-user annotation: the engine, the view, the agent
// authorizer and the server's report keeping all ask it, so that a
// Cluster gets one answer everywhere.
package delivery

import (
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// AgentUser returns the upstream user a Cluster's agent authenticates as,
// and whether the Cluster is pulled: it carries courier.dev/agent-user
// with a value. An empty value names no agent (no identity is the empty
// string, so no agent could read its rows): such a Cluster is pushed, as
// one without the annotation is, and its rows say so if it has no
// kubeconfig either.
func AgentUser(c *fleet.Cluster) (user string, pulled bool) {
	if c == nil {
		return "", false
	}
	user = c.Annotations[courier.AnnotationAgentUser]
	return user, user != ""
}

// Pulled reports whether a Cluster is delivered by its own agent
// (AgentUser).
func Pulled(c *fleet.Cluster) bool {
	_, pulled := AgentUser(c)
	return pulled
}
