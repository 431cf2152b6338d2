package server

import (
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
)

// pullDelivery wires the server side of pull delivery (DESIGN §9): it puts
// the agent authorizer in front of the delegated one in cfg, and returns
// what the payload subresource reads. The agent authorizer only denies, so
// every request it lets through still needs the upstream RBAC's allow;
// placed first, its denials also hold for system:masters, whom the
// delegated authorizer allows without asking.
func pullDelivery(cfg *genericapiserver.RecommendedConfig, v *views, upstreamID string) (apiserver.PayloadConfig, error) {
	agents := agentauth.New(v.agents, agentauth.StoreRows{Store: v.downstreamCopies})
	authz, err := agentauth.WithDelegate(agents, cfg.Authorization.Authorizer)
	if err != nil {
		return apiserver.PayloadConfig{}, err
	}
	cfg.Authorization.Authorizer = authz
	return apiserver.PayloadConfig{
		Sources:    downstreamcopy.ClientSources{Client: v.upstream.CoreV1()},
		Agents:     agents,
		UpstreamID: upstreamID,
	}, nil
}
