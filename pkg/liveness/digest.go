package liveness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/rowstatus"
	"github.com/courier-dev/courier/pkg/sharding"
)

// Liveness digests (docs/design.md#scale-out, docs/scale-out.md "Liveness"): an agent's
// heartbeat is kept in the memory of the replica that heard it, not in
// its Cluster's report. Each replica writes what it heard into a few
// small ConfigMaps of its own, one per digest shard,
// courier-agent-liveness.<replica>.<shard>, labelled
// courier.dev/agent-liveness=true and annotated courier.dev/replica. The
// key heard holds one line per Cluster,
//
//	<namespace>/<name> <last heard, Unix ms> <report interval, ms>
//
// sorted by Cluster. Every replica reads every digest (an informer) and
// takes, for each Cluster, the newest record among its own memory, the
// digests and the report's _heartbeat.
const (
	// Label marks digest ConfigMaps; the digest informer selects only
	// them.
	Label = "courier.dev/agent-liveness"
	// AnnotationReplica names the replica that writes a digest.
	AnnotationReplica = "courier.dev/replica"
	// DigestKey is the data key of a digest's records.
	DigestKey = "heard"
	// DigestShards is how many digests each replica spreads its Clusters
	// over (sharding.Bucket with this count): at 10,000 Clusters about 625
	// each, ~30 KiB with names of 30 characters.
	DigestShards = 16
	// namePrefix starts every digest's name.
	namePrefix = "courier-agent-liveness."
)

// heard is when a Cluster's agent was last heard and its report interval.
type heard struct {
	at       time.Time
	interval time.Duration
}

// deadline is when the Cluster turns Unreachable unless heard again.
func (h heard) deadline() time.Time {
	return h.at.Add(rowstatus.MissedIntervals * h.interval)
}

// newer reports whether h is a later record than o (a zero o is older
// than any record).
func (h heard) newer(o heard) bool { return h.at.After(o.at) }

// DigestName is the name of a replica's digest of one shard.
func DigestName(identity string, shard int) string {
	return namePrefix + identity + "." + strconv.Itoa(shard)
}

// digestShard is the shard a Cluster's records are kept in.
func digestShard(c types.NamespacedName) int {
	return sharding.Bucket(c.Namespace, c.Name, DigestShards)
}

// NewIdentity returns a replica identity for digest names: host (the Pod
// name) made a valid name part, with a random suffix so that two
// processes never share a digest, also on one host.
func NewIdentity(host string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	id := strings.Trim(b.String(), "-")
	if len(id) > 60 {
		id = strings.Trim(id[:60], "-")
	}
	if id == "" {
		id = "courier"
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return id + "-" + hex.EncodeToString(suffix)
}

// encodeDigest returns the heard key's value for records.
func encodeDigest(records map[types.NamespacedName]heard) string {
	keys := make([]types.NamespacedName, 0, len(records))
	for c := range records {
		keys = append(keys, c)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var b strings.Builder
	b.Grow(len(keys) * 48)
	for _, c := range keys {
		h := records[c]
		fmt.Fprintf(&b, "%s/%s %d %d\n", c.Namespace, c.Name, h.at.UnixMilli(), h.interval.Milliseconds())
	}
	return b.String()
}

// decodeDigest reads a digest's records, skipping malformed lines and
// intervals outside [MinInterval, MaxInterval].
func decodeDigest(s string) map[types.NamespacedName]heard {
	out := map[types.NamespacedName]heard{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		ns, name, ok := strings.Cut(f[0], "/")
		at, err1 := strconv.ParseInt(f[1], 10, 64)
		iv, err2 := strconv.ParseInt(f[2], 10, 64)
		interval := time.Duration(iv) * time.Millisecond
		if !ok || ns == "" || name == "" || err1 != nil || err2 != nil || interval < MinInterval || interval > MaxInterval {
			continue
		}
		out[types.NamespacedName{Namespace: ns, Name: name}] = heard{at: time.UnixMilli(at), interval: interval}
	}
	return out
}

// newDigest returns a replica's digest of one shard.
func newDigest(namespace, identity string, shard int, records map[types.NamespacedName]heard) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        DigestName(identity, shard),
			Labels:      map[string]string{Label: "true"},
			Annotations: map[string]string{AnnotationReplica: identity},
		},
		Data: map[string]string{DigestKey: encodeDigest(records)},
	}
}
