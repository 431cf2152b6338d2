// Package importrules holds the test that keeps Courier's import graph in
// the shape docs/design.md describes: the copy engine and the
// courier-agent take their contract from pkg/copycontract and never reach
// the server's view, its store or its registry, so that what the agent
// runs in a downstream cluster is the engine and nothing of the server,
// nor of any API server library or etcd client.
// The rules are checked with `go list -deps`, in `make test`.
package importrules
