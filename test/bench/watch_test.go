package bench

import (
	"testing"

	"github.com/courier-dev/courier/test/fleetsim"
)

// startWatcher watches the Secrets labelled benchLabel on every downstream
// (fleetsim.Watcher) until the test ends.
func startWatcher(t *testing.T) *fleetsim.Watcher {
	t.Helper()
	w, err := fleetsim.StartWatcher(env.Downstreams, benchLabel, roundKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}
