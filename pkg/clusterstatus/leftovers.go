package clusterstatus

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// Leftover copies of a pushed Cluster (docs/design.md#scale-out): the copies
// Courier made there that no row wants any more (Kept, Deleting) are found
// by its deliverer's sweep only, since no other replica reaches the
// Cluster. So that every replica shows their rows, the deliverer keeps
// them in the Cluster's status object too, under LeftoversKey, and the
// Store files them by owner (Store.Leftovers): a replica asks for one
// owner's leftovers at every sync of its rows, and must not read every
// Cluster's object to answer.

// LeftoversKey is the data key of a pushed Cluster's leftover copies: a
// JSON list of leftoverEntry. Like HeartbeatKey no row name can be it
// (row names are lower-case DNS subdomains, without "_"). An object
// without it holds none.
const LeftoversKey = "_leftovers"

// leftoverEntry is a leftover copy as the status object holds it: what its
// row shows, never the copy's data or a hash of it.
type leftoverEntry struct {
	// Owner is the owner key ("<namespace>/<name>", copycontract.OwnerKey)
	// the copy was written for.
	Owner                 string            `json:"owner"`
	Cluster               string            `json:"cluster"`
	Kind                  string            `json:"kind"`
	Name                  string            `json:"name"`
	TargetNamespace       string            `json:"targetNamespace"`
	Keep                  bool              `json:"keep,omitempty"`
	Phase                 courier.CopyPhase `json:"phase"`
	Message               string            `json:"message,omitempty"`
	SyncedResourceVersion string            `json:"syncedResourceVersion,omitempty"`
}

// encodeLeftovers returns the LeftoversKey value of ls, messages cut to
// limit bytes; "" when there are none.
func encodeLeftovers(ls []copycontract.Leftover, limit int) (string, error) {
	if len(ls) == 0 {
		return "", nil
	}
	out := make([]leftoverEntry, len(ls))
	for i, l := range ls {
		out[i] = leftoverEntry{Owner: l.HelmOp.String(), Cluster: l.Cluster, Kind: l.Kind, Name: l.Name,
			TargetNamespace: l.TargetNamespace, Keep: l.Keep, Phase: l.Phase,
			Message: truncate(l.Message, limit), SyncedResourceVersion: l.SyncedResourceVersion}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// decodeLeftovers reads the LeftoversKey value of Cluster c's object.
// Entries that are not of c (another Cluster, an owner of another
// namespace: a Cluster's copies are written for owners of its own
// namespace) or not a leftover's phase are skipped, so that nothing
// written by hand shows as another Cluster's row.
func decodeLeftovers(c types.NamespacedName, v string) []copycontract.Leftover {
	var in []leftoverEntry
	if json.Unmarshal([]byte(v), &in) != nil {
		return nil
	}
	var out []copycontract.Leftover
	for _, e := range in {
		ns, name, ok := strings.Cut(e.Owner, "/")
		if !ok || ns != c.Namespace || name == "" || e.Cluster != c.Name ||
			(e.Phase != courier.CopyPhaseKept && e.Phase != courier.CopyPhaseDeleting) {
			continue
		}
		out = append(out, copycontract.Leftover{HelmOp: types.NamespacedName{Namespace: ns, Name: name}, Cluster: e.Cluster,
			Kind: e.Kind, Name: e.Name, TargetNamespace: e.TargetNamespace, Keep: e.Keep, Phase: e.Phase,
			Message: e.Message, SyncedResourceVersion: e.SyncedResourceVersion})
	}
	return out
}

// sameLeftovers reports whether the leftovers ls say nothing new over the
// stored prev: the same copies in the same order, each message the same
// or prev's cut from it (encode shortens messages of a large object).
func sameLeftovers(prev, ls []copycontract.Leftover) bool {
	return slices.EqualFunc(prev, ls, func(p, l copycontract.Leftover) bool {
		if !sameMessage(p.Message, l.Message) {
			return false
		}
		p.Message, l.Message = "", ""
		return p == l
	})
}

// byOwner groups leftovers by owner, keeping their order.
func byOwner(ls []copycontract.Leftover) map[types.NamespacedName][]copycontract.Leftover {
	out := map[types.NamespacedName][]copycontract.Leftover{}
	for _, l := range ls {
		out[l.HelmOp] = append(out[l.HelmOp], l)
	}
	return out
}

// indexLeftoversLocked files the leftovers of Cluster c under their
// owners, replacing what prev (its object's leftovers before) filed, and
// returns the owners whose leftovers in c changed. s.mu must be held.
func (s *Store) indexLeftoversLocked(c types.NamespacedName, prev, next []copycontract.Leftover) []types.NamespacedName {
	before, after := byOwner(prev), byOwner(next)
	var changed []types.NamespacedName
	for owner := range before {
		if _, ok := after[owner]; ok {
			continue
		}
		delete(s.byOwner[owner], c)
		if len(s.byOwner[owner]) == 0 {
			delete(s.byOwner, owner)
		}
		changed = append(changed, owner)
	}
	for owner, ls := range after {
		if s.byOwner[owner] == nil {
			s.byOwner[owner] = map[types.NamespacedName][]copycontract.Leftover{}
		}
		s.byOwner[owner][c] = ls
		if !slices.Equal(before[owner], ls) {
			changed = append(changed, owner)
		}
	}
	return changed
}

// Leftovers returns the leftover copies of one owner that the status
// objects hold, by Cluster in name order. Its cost is that owner's
// leftovers: the Store files them by owner as the objects change.
func (s *Store) Leftovers(owner types.NamespacedName) []copycontract.Leftover {
	s.mu.RLock()
	defer s.mu.RUnlock()
	clusters := make([]types.NamespacedName, 0, len(s.byOwner[owner]))
	for c := range s.byOwner[owner] {
		clusters = append(clusters, c)
	}
	slices.SortFunc(clusters, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var out []copycontract.Leftover
	for _, c := range clusters {
		out = append(out, s.byOwner[owner][c]...)
	}
	return out
}

// notifyLeftovers tells Options.OnLeftovers the owners whose leftovers
// changed.
func (s *Store) notifyLeftovers(owners []types.NamespacedName) {
	if s.onLeftovers == nil {
		return
	}
	for _, o := range owners {
		s.onLeftovers(o)
	}
}
