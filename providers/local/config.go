package local

import (
	"maps"
	"time"

	"github.com/hashicorp/hcl/v2"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// Schema is the local provider's configuration: a pool may have a local
// { } block with env, extra environment for its workers; a launched worker
// has a minute to register.
var Schema = wdchcl.ProviderSchema{LaunchTimeout: time.Minute, Decode: decodeBlock}

// Settings are a pool's local { } block. A pool without one has none (nil
// Settings in its launch requests).
type Settings struct {
	// Env is extra environment for every worker process of the pool; never
	// nil.
	Env map[string]string
	// Range is the block's range.
	Range hcl.Range
}

var _ wdchcl.ProviderSettings = (*Settings)(nil)

// WritesAllowed is false: local workers write to no cluster.
func (s *Settings) WritesAllowed() bool { return false }

// BlockRange is the local block's range.
func (s *Settings) BlockRange() hcl.Range { return s.Range }

type localBody struct {
	Env *hcl.Attribute `hcl:"env,optional"`
}

// decodeBlock decodes a pool's local block; a pool without one has no
// settings.
func decodeBlock(b *wdchcl.ProviderBlock) wdchcl.ProviderSettings {
	if b.Body == nil {
		return nil
	}
	var body localBody
	if !b.DecodeBody(&body) {
		return nil
	}
	return &Settings{Env: b.StringMap(body.Env), Range: b.DefRange}
}

// withBlockEnv returns req with the env of the pool's local block (its
// Settings) under req.Env's own entries.
func withBlockEnv(req providers.LaunchRequest) providers.LaunchRequest {
	s, _ := req.Settings.(*Settings)
	if s == nil || len(s.Env) == 0 {
		return req
	}
	env := maps.Clone(s.Env)
	maps.Copy(env, req.Env)
	req.Env = env
	return req
}
