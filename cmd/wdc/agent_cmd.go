package main

import "github.com/wdc-dev/wdc/cmd/internal/agentcli"

// AgentCmd is `wdc agent`: one worker against a coordinator. It is the
// command wdc-agent runs as `wdc-agent agent`, so both binaries take the
// same flags (cmd/internal/agentcli).
type AgentCmd = agentcli.AgentCmd

// InstallAgentCmd is `wdc install-agent DEST`, as wdc-agent has it: an
// image of wdc serves as a Kubernetes pool's agent_image too.
type InstallAgentCmd = agentcli.InstallAgentCmd
