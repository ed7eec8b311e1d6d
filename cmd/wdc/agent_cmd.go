package main

import "github.com/wdc-dev/wdc/cmd/internal/agentcli"

// AgentCmd is `wdc agent`: one worker against a coordinator. It is the
// command wdc-agent runs as `wdc-agent agent`, so both binaries take the
// same flags (cmd/internal/agentcli).
type AgentCmd = agentcli.AgentCmd
