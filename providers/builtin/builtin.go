package builtin

import (
	// The local provider: worker processes on this machine.
	_ "github.com/wdc-dev/wdc/providers/local"
)
