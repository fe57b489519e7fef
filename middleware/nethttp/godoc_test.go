package httplock

import (
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

// go doc shows an exported value as written: none is built by a call into
// an internal package.
func TestExportedValuesNameNoInternalPackage(t *testing.T) { locktest.NoInternalValues(t) }
