package server

import (
	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
)

// deniedNotes records, through the engine, the Warning Event for an
// agent's new note on a Denied row.
type deniedNotes struct{ v *views }

var _ downstreamcopy.DeniedNotes = deniedNotes{}

func (n deniedNotes) Noted(row *courier.DownstreamCopy, note string) {
	if n.v.engine != nil {
		n.v.engine.AgentNoted(copycontract.OwnerKey(row.Namespace, row.Spec), note)
	}
}
