// Package providers is the launch-target contract: how `wdc apply` starts,
// watches and stops workers (`wdc agent` processes) wherever a pool's
// provider puts them — local processes, Ray jobs, Kubernetes Jobs.
//
// As in Terraform, every call takes a request struct and returns a response
// struct (LaunchRequest → LaunchResponse, StopRequest, StatusRequest →
// StatusResponse). Render gives the agent command line every provider runs,
// so `wdc plan` can show it without launching anything. The launch's
// one-time credential is never on that command line: providers pass it in
// the environment (protocol.LaunchCredentialEnv). Reclaim stops what a
// dead apply left running, by what the provider recorded at launch.
//
// Provider packages register themselves from init with an Info (name,
// source, summary, capabilities, and the configuration schema of their
// pools); providers/builtin imports every built-in one. The registry is
// the one place provider names and their defaults live: Schemas gives the
// configuration language every provider a pool may name (the registered
// ones and External, the pseudo-provider of pools whose workers join by
// themselves) with its schema, and LaunchTimeout a provider's default
// launch_timeout. Lookup finds a provider by name and says clearly when a
// name is unknown; List gives the registry's listing (`wdc providers`).
//
// Each provider owns its configuration: its Info.Schema decodes and checks
// a pool's provider block (hcl.ProviderBlock) into the provider's own
// settings type, which the language keeps behind hcl.ProviderSettings
// (WritesAllowed, BlockRange: all the engine needs of it) and every
// LaunchRequest and ReclaimRequest of the pool carries back to the
// provider. A capability is a promise: Render needs the
// Renderer interface and DryRun the DryRunner interface, and a provider
// that breaks a promise, or whose Name is not the one it registered, gets
// a *ContractError (naming the provider and the Rule) from Lookup, List
// and Validate instead of being used. Every built-in provider must pass
// the conformance suite in providers/providertest; providers/builtin's
// tests run it against each one.
//
// This package launches workers; it does not decide how many (package
// engine plans that) and does not talk to them (they speak worker protocol
// v1 with the coordinator, package protocol).
package providers
