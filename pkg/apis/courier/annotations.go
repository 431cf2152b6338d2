package courier

// AnnotationAgentUser on a Fleet Cluster makes the Cluster pulled rather
// than pushed (docs/design.md#public-names and docs/design.md#pull-delivery): its value is the upstream username its
// courier-agent authenticates as. Only that user may read the payloads of
// the Cluster's rows, and that user may read nothing else of Courier's.
const AnnotationAgentUser = "courier.dev/agent-user"

// AnnotationReportInterval on the DownstreamCopy a courier-agent sends to
// downstreamcopies/<row>/status is its --report-interval as a Go duration
// (e.g. 30s): a pulled Cluster whose agent is not heard from for three
// such intervals shows its rows Unreachable (docs/design.md#pull-delivery). Without it the
// interval is 30s, the agent's default.
const AnnotationReportInterval = "courier.dev/report-interval"

// LabelDeliver on every DownstreamCopy row says whether its copy is
// delivered: "true" for a row whose copy the deliverer (Courier's engine
// for a pushed Cluster, the courier-agent of a pulled one) writes and
// keeps in step; "false" for a row whose copy no owner may have any more
// -- a leftover copy (Kept, Deleting) or a source that may not be exported
// (Denied) -- whose copy the deliverer removes unless it was written with
// keepResources. Deliverers decide from this label and the row's spec,
// never from its displayed phase. A row without it (an older server) is
// delivered.
const LabelDeliver = "courier.dev/deliver"

// Delivered reports whether a row's copy is delivered (LabelDeliver).
func Delivered(labels map[string]string) bool { return labels[LabelDeliver] != "false" }
