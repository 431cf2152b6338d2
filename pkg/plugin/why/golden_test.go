package why

import (
	"testing"

	"github.com/courier-dev/courier/pkg/plugin/fixture"
)

func fixtureGolden(t *testing.T, name, got string) { fixture.Golden(t, name, got) }
