package clusterstatus

import (
	"strings"
	"time"
)

// LastSyncTimeStep is how far a row's reported lastSyncTime must move
// forward, with phase, message and syncedResourceVersion unchanged, to be
// written. The engine keeps lastSyncTime while a copy stays current, so
// only a restarted agent (which confirms its copies current anew) moves
// it alone: a restart is worth one write, a crash-looping agent not one
// per restart.
const LastSyncTimeStep = 10 * time.Minute

// sameStatus reports whether a reported entry e says nothing new over the
// stored prev: the same phase, message (prev may be e's cut to fit, see
// encode) and syncedResourceVersion, and a lastSyncTime less than
// LastSyncTimeStep later (or earlier: a clock set back).
func sameStatus(prev, e Entry) bool {
	if prev.Phase != e.Phase || prev.SyncedResourceVersion != e.SyncedResourceVersion {
		return false
	}
	if !sameMessage(prev.Message, e.Message) {
		return false
	}
	switch {
	case prev.LastSyncTime == nil || e.LastSyncTime == nil:
		return prev.LastSyncTime == nil && e.LastSyncTime == nil
	default:
		return e.LastSyncTime.Sub(prev.LastSyncTime.Time) < LastSyncTimeStep
	}
}

// sameMessage reports whether the stored message prev is m, or m cut to
// fit (see encode).
func sameMessage(prev, m string) bool {
	cut := strings.HasSuffix(prev, "...") && len(prev) < len(m) && truncate(m, len(prev)) == prev
	return prev == m || cut
}
