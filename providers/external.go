package providers

import (
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// External is the provider name of pools whose workers join by themselves,
// from any machine, with a join token: apply launches nothing for them.
// It is no provider of the registry (there is nothing to launch, render,
// dry-run or write to a cluster), but pools name it like one, and its
// schema is among Schemas.
const External = "external"

// ExternalInfo describes the external pseudo-provider for `wdc providers`.
var ExternalInfo = Info{
	Name:    External,
	Source:  SourceBuiltIn,
	Summary: "workers that join from any machine with a join token; apply launches nothing",
}

// externalSchema: an external pool takes no settings (an external { }
// block must be empty), and apply waits up to 10 minutes for a worker to
// join it.
var externalSchema = wdchcl.ProviderSchema{LaunchTimeout: 10 * time.Minute}
