package courier

// AnnotationAgentUser on a Fleet Cluster makes the Cluster pulled rather
// than pushed (DESIGN §1 and §9): its value is the upstream username its
// courier-agent authenticates as. Only that user may read the payloads of
// the Cluster's rows, and that user may read nothing else of Courier's.
const AnnotationAgentUser = "courier.dev/agent-user"

// AnnotationReportInterval on the DownstreamCopy a courier-agent sends to
// downstreamcopies/<row>/status is its --report-interval as a Go duration
// (e.g. 30s): a pulled Cluster whose agent is not heard from for three
// such intervals shows its rows Unreachable (DESIGN §9). Without it the
// interval is 30s, the agent's default.
const AnnotationReportInterval = "courier.dev/report-interval"
