package delivery

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// The agent annotation (courier.AnnotationAgentUser) names the upstream
// user a pulled Cluster's agent authenticates as
// (docs/design.md#pull-delivery):
//
//   - absent, or empty: no agent is named (no identity is the empty
//     string), so the Cluster is pushed, as before the annotation existed;
//   - a user name an agent can authenticate as: pulled by that agent;
//   - anything else (white space around it, control characters, the
//     anonymous user, a malformed ServiceAccount user): nobody delivers,
//     and the Cluster's rows say why. Neither pushing (its owner asked for
//     pull) nor waiting for an agent that can never be recognised would
//     do what was meant.

const (
	anonymous      = "system:anonymous"
	serviceAccount = "system:serviceaccount:"
)

// ofAnnotation answers from a Cluster's annotations.
func ofAnnotation(annotations map[string]string) Answer {
	user, ok := annotations[courier.AnnotationAgentUser]
	if !ok || user == "" {
		return Answer{Way: Pushed}
	}
	if why := malformed(user); why != "" {
		return Answer{Way: Nobody, Reason: fmt.Sprintf("the Cluster's %s annotation %q names no agent Courier can recognise: %s; correct it, or remove it to push",
			courier.AnnotationAgentUser, user, why)}
	}
	return Answer{Way: Agent, Agent: user}
}

// malformed says why user cannot be an agent's user name, "" when it can.
func malformed(user string) string {
	switch {
	case !utf8.ValidString(user):
		return "it is not valid UTF-8"
	case strings.TrimSpace(user) != user:
		return "it has white space around it"
	case strings.IndexFunc(user, unicode.IsControl) >= 0:
		return "it has a control character"
	case user == anonymous:
		return "the anonymous user is never an agent"
	case strings.HasPrefix(user, serviceAccount):
		ns, name, ok := strings.Cut(strings.TrimPrefix(user, serviceAccount), ":")
		if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
			return "a ServiceAccount user is system:serviceaccount:<namespace>:<name>"
		}
	}
	return ""
}
