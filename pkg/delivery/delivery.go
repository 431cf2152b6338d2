// Package delivery answers, for every Fleet Cluster, who delivers its
// copies (docs/design.md#pull-delivery, docs/design.md#scale-out): its own
// courier-agent (pulled), this replica, another replica (the holder of
// the Cluster's bucket), the leader, or nobody, and then why.
//
// It is the one reader of the agent annotation (courier.AnnotationAgentUser):
// the engine, the view, the DELIVERED-BY column, the agent authorizer
// (and through it the payload endpoint) and the server's report keeping
// all ask it, so that a Cluster gets one answer everywhere. It imports
// nothing heavy: who holds a bucket is pkg/sharding's to know, and comes
// in through Holders.
package delivery

import (
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// Way is who delivers a Cluster's copies.
type Way int

const (
	// Nobody delivers; Answer.Reason says why (a malformed agent
	// annotation, no replica holding the Cluster's bucket yet).
	Nobody Way = iota
	// Agent: the Cluster is pulled by its courier-agent, Answer.Agent.
	Agent
	// Pushed: the replicas push the Cluster's copies, through its
	// kubeconfig; which replica is By's to say.
	Pushed
	// ThisReplica holds the Cluster's bucket (Answer.Replica is its name).
	ThisReplica
	// Replica: another replica, Answer.Replica, holds the Cluster's bucket.
	Replica
	// Leader: without sharding the elected leader pushes every Cluster.
	Leader
)

// String names the way, for messages and logs.
func (w Way) String() string {
	switch w {
	case Agent:
		return "agent"
	case Pushed:
		return "pushed"
	case ThisReplica:
		return "this replica"
	case Replica:
		return "replica"
	case Leader:
		return "leader"
	}
	return "nobody"
}

// Answer is who delivers one Cluster's copies.
type Answer struct {
	Way Way
	// Agent is the upstream user the Cluster's agent authenticates as
	// (Way Agent).
	Agent string
	// Replica names the replica holding the Cluster's bucket (Way
	// ThisReplica or Replica).
	Replica string
	// Reason says why nobody delivers (Way Nobody); it names no secret.
	Reason string
	// unheld: nobody delivers only because no replica holds the pushed
	// Cluster's bucket yet.
	unheld bool
}

// Pulled reports whether the Cluster's agent delivers it.
func (a Answer) Pulled() bool { return a.Way == Agent }

// Pushed reports whether the replicas deliver the Cluster (whether or not
// one holds its bucket yet): the engine writes for it, and nobody else.
func (a Answer) Pushed() bool {
	return a.Way == Pushed || a.Way == ThisReplica || a.Way == Replica || a.Way == Leader || a.unheld
}

// String is the answer as the DELIVERED-BY column shows it: "agent", the
// replica's name, "leader", "pushed" (no replica asked) or "<none>".
func (a Answer) String() string {
	switch a.Way {
	case Agent:
		return "agent"
	case Pushed:
		return "pushed"
	case ThisReplica, Replica:
		return a.Replica
	case Leader:
		return "leader"
	}
	return "<none>"
}

// Holders names who holds a pushed Cluster's bucket when every replica
// delivers (docs/design.md#scale-out). pkg/sharding owns the Leases; the
// server adapts its Manager.
type Holders interface {
	// HolderOf returns the replica holding the bucket of the Cluster
	// namespace/name as this replica sees it, "" while none does.
	HolderOf(namespace, name string) string
	// Self is this replica's name.
	Self() string
}

// noHolder is the Reason of a pushed Cluster whose bucket no replica holds.
const noHolder = "no replica holds the Cluster's bucket yet"

// Of answers from the Cluster alone: pulled by its agent, pushed by the
// replicas, or, with a malformed agent annotation, nobody
// (docs/design.md#pull-delivery). A nil Cluster is delivered by nobody.
func Of(c *fleet.Cluster) Answer {
	if c == nil {
		return Answer{Way: Nobody, Reason: "the Cluster is not known"}
	}
	return ofAnnotation(c.Annotations)
}

// By is Of with a pushed Cluster's replica named: the leader when holders
// is nil (no sharding), else the holder of the Cluster's bucket, or nobody
// while none holds it.
func By(c *fleet.Cluster, holders Holders) Answer {
	a := Of(c)
	if a.Way != Pushed {
		return a
	}
	if holders == nil {
		return Answer{Way: Leader}
	}
	switch h := holders.HolderOf(c.Namespace, c.Name); h {
	case "":
		return Answer{Way: Nobody, Reason: noHolder, unheld: true}
	case holders.Self():
		return Answer{Way: ThisReplica, Replica: h}
	default:
		return Answer{Way: Replica, Replica: h}
	}
}
