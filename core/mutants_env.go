//go:build lockgate_mutants

package core

import "os"

// A binary built with the lockgate_mutants tag (the fault rig's controls)
// puts back the defects LOCKGATE_MUTANTS names in every Locker it makes.
func init() { envMutants = os.Getenv("LOCKGATE_MUTANTS") }
