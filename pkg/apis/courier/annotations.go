package courier

// AnnotationAgentUser on a Fleet Cluster makes the Cluster pulled rather
// than pushed (DESIGN §1 and §9): its value is the upstream username its
// courier-agent authenticates as. Only that user may read the payloads of
// the Cluster's rows, and that user may read nothing else of Courier's.
const AnnotationAgentUser = "courier.dev/agent-user"
