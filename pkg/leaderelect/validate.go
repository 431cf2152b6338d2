// Package leaderelect holds what Courier's two binaries (courier-apiserver
// and courier-agent) share about leader election.
package leaderelect

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
)

// Validate reports what leaderelection.NewLeaderElector would refuse, at
// flag parsing rather than after the process started.
func Validate(c componentbaseconfig.LeaderElectionConfiguration) []error {
	if !c.LeaderElect {
		return nil
	}
	var errs []error
	if c.ResourceLock != resourcelock.LeasesResourceLock {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q, got %q", resourcelock.LeasesResourceLock, c.ResourceLock))
	}
	if c.ResourceName == "" || c.ResourceNamespace == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty"))
	}
	lease, renew, retry := c.LeaseDuration.Duration, c.RenewDeadline.Duration, c.RetryPeriod.Duration
	if lease <= renew {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", lease, renew))
	}
	if renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than %.1f x --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry))
	}
	return errs
}
