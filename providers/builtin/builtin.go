package builtin

import (
	// The Kubernetes provider: workers as batch/v1 Jobs.
	_ "github.com/wdc-dev/wdc/providers/kubernetes"
	// The local provider: worker processes on this machine.
	_ "github.com/wdc-dev/wdc/providers/local"
	// The Ray provider: workers as Ray jobs, through the Jobs REST API.
	_ "github.com/wdc-dev/wdc/providers/ray"
)
