package sharding

import (
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
)

// TestBucketGolden pins Bucket: it is part of the on-cluster protocol
// (every replica must agree), so these values must never change. If this
// test fails, the change is a protocol change, not a refactoring.
func TestBucketGolden(t *testing.T) {
	for _, tc := range []struct {
		ns, name string
		buckets  int
		want     int
	}{
		{"fleet-default", "downstream-1", 64, 42},
		{"fleet-default", "downstream-2", 64, 55},
		{"fleet-local", "local", 64, 13},
		{"", "", 64, 62},
		{"a", "b", 64, 33},
		{"fleet-default", "downstream-1", 1024, 298},
		{"fleet-default", "downstream-2", 1024, 887},
		{"fleet-local", "local", 1024, 653},
		{"fleet-default", "downstream-1", 1, 0},
	} {
		if got := Bucket(tc.ns, tc.name, tc.buckets); got != tc.want {
			t.Errorf("Bucket(%q, %q, %d) = %d, want %d (protocol change!)", tc.ns, tc.name, tc.buckets, got, tc.want)
		}
	}
}

// TestFNVIsTheLibrarys checks that the written-out FNV-1a is hash/fnv's,
// so the protocol can be stated as "FNV-1a 64".
func TestFNVIsTheLibrarys(t *testing.T) {
	for _, s := range []string{"", "a", "fleet-default/downstream-1", "courier-0/63"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv1a64(s), h.Sum64(); got != want {
			t.Errorf("fnv1a64(%q) = %#x, hash/fnv says %#x", s, got, want)
		}
	}
}

func TestBucketPanicsWithoutBuckets(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Bucket with 0 buckets did not panic")
		}
	}()
	Bucket("a", "b", 0)
}

// TestDesiredOwnerGolden pins the rendezvous weights and their outcome,
// part of the protocol as Bucket is.
func TestDesiredOwnerGolden(t *testing.T) {
	if got := weight("courier-0", 0); got != 0x84b4f2e53c916e62 {
		t.Errorf("weight(courier-0, 0) = %#x (protocol change!)", got)
	}
	if got := weight("courier-1", 63); got != 0xba41ee9b381d7e87 {
		t.Errorf("weight(courier-1, 63) = %#x (protocol change!)", got)
	}
	members := []string{"courier-0", "courier-1", "courier-2"}
	want := []string{"courier-2", "courier-0", "courier-2", "courier-1", "courier-1", "courier-2", "courier-0", "courier-2"}
	for b, w := range want {
		if got := DesiredOwner(b, members); got != w {
			t.Errorf("DesiredOwner(%d, %v) = %q, want %q (protocol change!)", b, members, got, w)
		}
	}
}

func TestDesiredOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bucket  int
		members []string
		want    string
	}{
		{name: "no members", bucket: 0, members: nil, want: ""},
		{name: "only empty names", bucket: 0, members: []string{""}, want: ""},
		{name: "one member", bucket: 5, members: []string{"a"}, want: "a"},
		{name: "empty name ignored", bucket: 0, members: []string{"", "courier-0", "courier-1", "courier-2"}, want: "courier-2"},
		{name: "duplicates ignored", bucket: 0, members: []string{"courier-2", "courier-0", "courier-2", "courier-1"}, want: "courier-2"},
		{name: "order ignored", bucket: 3, members: []string{"courier-2", "courier-1", "courier-0"}, want: "courier-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DesiredOwner(tc.bucket, tc.members); got != tc.want {
				t.Errorf("DesiredOwner(%d, %v) = %q, want %q", tc.bucket, tc.members, got, tc.want)
			}
		})
	}
}

// TestRemovingAMemberMovesOnlyItsBuckets: a replica leaving hands over
// its own buckets and nothing else; one joining takes only buckets it wins.
func TestRemovingAMemberMovesOnlyItsBuckets(t *testing.T) {
	for _, members := range [][]string{
		{"courier-0", "courier-1", "courier-2"},
		{"courier-0", "courier-1", "courier-2", "courier-3", "courier-4"},
		{"courier-5d8c7-abcde", "courier-5d8c7-fghij"},
	} {
		for i, gone := range members {
			rest := slices.Delete(slices.Clone(members), i, i+1)
			for b := 0; b < DefaultBuckets; b++ {
				before, after := DesiredOwner(b, members), DesiredOwner(b, rest)
				if before != gone && before != after {
					t.Errorf("members %v without %s: bucket %d moved from %s to %s", members, gone, b, before, after)
				}
				if after == gone {
					t.Errorf("bucket %d still desired by the removed %s", b, gone)
				}
			}
		}
	}
}

// TestBalance states the bound: with 3 members and 64 buckets (21.3
// each if perfectly even), over 1,000 sets of Deployment-style Pod names,
// no member ever gets fewer than 10 or more than 35 buckets, at least 95%
// of the sets give no member more than 30 (1.4× its fair share), and the
// largest share averages at most 26 -- what assigning each bucket to a
// uniformly random member gives (about 25.3), so the hash adds no skew.
// For the StatefulSet names courier-0..2 each member gets 16 to 27.
func TestBalance(t *testing.T) {
	counts := func(members []string) map[string]int {
		c := map[string]int{}
		for b := 0; b < DefaultBuckets; b++ {
			c[DesiredOwner(b, members)]++
		}
		return c
	}
	for m, n := range counts([]string{"courier-0", "courier-1", "courier-2"}) {
		if n < 16 || n > 27 {
			t.Errorf("%s desired for %d of 64 buckets, want 16..27", m, n)
		}
	}
	const sets = 1000
	sumLargest, within30 := 0, 0
	for i := 0; i < sets; i++ {
		members := []string{
			fmt.Sprintf("courier-7d9f8b6c4-%05d", 3*i), fmt.Sprintf("courier-7d9f8b6c4-%05d", 3*i+1), fmt.Sprintf("courier-7d9f8b6c4-%05d", 3*i+2),
		}
		largest := 0
		for _, m := range members {
			n := counts(members)[m]
			if n < 10 || n > 35 {
				t.Errorf("members %v: %s desired for %d of 64 buckets, want 10..35", members, m, n)
			}
			largest = max(largest, n)
		}
		sumLargest += largest
		if largest <= 30 {
			within30++
		}
	}
	if within30 < sets*95/100 {
		t.Errorf("%d of %d member sets have no member above 30 buckets, want at least 95%%", within30, sets)
	}
	if avg := float64(sumLargest) / sets; avg > 26 {
		t.Errorf("largest share averages %.2f buckets, want at most 26", avg)
	}
}
