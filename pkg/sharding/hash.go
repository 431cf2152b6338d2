package sharding

import (
	"strconv"
)

// The two hashes below are part of the on-cluster protocol: every replica
// must compute the same bucket for a Cluster and the same desired owner
// for a bucket, also while replicas of two Courier versions run side by
// side in a rolling update. Changing either one silently would make two
// versions disagree about who should hold a bucket; the Leases keep that
// safe (never two writers) but every disagreeing bucket would flap between
// replicas until the rollout ends. hash_test.go pins both with golden
// values: a change must come with a new protocol version and a migration,
// never as a refactoring.

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnv1a64 is FNV-1a, 64 bits (the same as hash/fnv's New64a), written out
// so that the protocol does not depend on a library's choice of defaults.
func fnv1a64(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// mix64 is SplitMix64's finalizer. FNV-1a of strings that differ only in
// their last bytes differ mostly in low bits; rendezvous hashing compares
// whole 64-bit weights, so they are mixed to spread every input bit over
// every output bit.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// Bucket returns the bucket of the Fleet Cluster clusterNamespace/clusterName
// among buckets (buckets > 0): FNV-1a 64 over the bytes of
// "<namespace>/<name>", modulo buckets. A Cluster's bucket never changes
// while the number of buckets stays the same, so ownership moves only when
// the members change. The modulo's bias is below 2^-57 for any bucket count
// Courier accepts. It panics when buckets < 1, a programming error that
// Config.Validate rules out for configured values.
func Bucket(clusterNamespace, clusterName string, buckets int) int {
	if buckets < 1 {
		panic("sharding: Bucket needs at least one bucket")
	}
	return int(fnv1a64(clusterNamespace+"/"+clusterName) % uint64(buckets))
}

// weight is member's rendezvous weight for bucket: mix64 of FNV-1a 64 over
// "<member>/<bucket in decimal>".
func weight(member string, bucket int) uint64 {
	return mix64(fnv1a64(member + "/" + strconv.Itoa(bucket)))
}

// DesiredOwner returns which of members should hold bucket: rendezvous
// (highest random weight) hashing, the member with the highest weight,
// ties broken by the smaller name. It is pure and independent of the order
// of members (duplicates and empty names do not matter). Removing a member moves only the
// buckets it was desired for, and adding one moves only the buckets it now
// wins: every other bucket keeps its owner, which is why a replica joining
// or leaving hands over about 1/n of the buckets and not a reshuffle. It
// returns "" when members is empty.
func DesiredOwner(bucket int, members []string) string {
	best, bestWeight := "", uint64(0)
	for _, m := range members {
		if m == "" {
			continue
		}
		w := weight(m, bucket)
		if best == "" || w > bestWeight || (w == bestWeight && m < best) {
			best, bestWeight = m, w
		}
	}
	return best
}
