package engine

import (
	"context"

	"github.com/courier-dev/courier/pkg/downstream"
)

// passReads are the reads a pass may need besides its copies: whether the
// fallback ServiceAccount exists (for groups naming none) and, once per
// client, the copies written before the cluster-hash label existed (for
// the sweep).
type passReads struct {
	fallback func() (bool, error)
	// unlabelled lists one kind's copies without the cluster-hash label.
	unlabelled func(ctx context.Context, kind string) ([]object, error)
}

// reads returns the pass's reads. On the first pass over a client (its
// informers not synced yet) they are started at once, in the background,
// so that they overlap the wait for the informers instead of following
// it: `make bench` at N=100 showed a new Cluster's pass as the informers'
// sync (76 ms), then the fallback ServiceAccount (30 ms), then the writes,
// then two live lists of unlabelled copies (113 ms), one after another.
// Later passes have the informers already and ask only what they need,
// when they need it (the fallback answer is cached; see fallbackLookup).
func (e *Engine) reads(ctx context.Context, client *downstream.Client, clusterKey string, copies []desiredCopy) passReads {
	r := passReads{
		fallback: e.fallbackLookup(ctx, client),
		unlabelled: func(ctx context.Context, kind string) ([]object, error) {
			return objectOps(client, client.Kube, kind).listUnlabelled(ctx)
		},
	}
	if e.cfg.SyncWait < 0 || client.HasSynced == nil || client.HasSynced() {
		return r
	}
	if e.delivers(clusterKey) && needsFallback(copies) {
		r.fallback = startRead(r.fallback)
	}
	if e.clients.needsLegacySweep(clusterKey, client) {
		live := r.unlabelled
		lists := map[string]func() ([]object, error){}
		for _, kind := range sweptKinds {
			lists[kind] = startRead(func() ([]object, error) { return live(ctx, kind) })
		}
		r.unlabelled = func(_ context.Context, kind string) ([]object, error) { return lists[kind]() }
	}
	return r
}

// needsFallback reports whether a write for copies could be made as the
// fallback ServiceAccount: some copyable copy names no ServiceAccount.
func needsFallback(copies []desiredCopy) bool {
	for _, c := range copies {
		if c.copyable && c.serviceAccount == "" {
			return true
		}
	}
	return false
}

// startRead runs read once, now, in the background, and returns a function
// that waits for its result; every call returns the same result.
func startRead[T any](read func() (T, error)) func() (T, error) {
	var (
		v    T
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		v, err = read()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}
