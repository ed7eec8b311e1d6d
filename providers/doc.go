// Package providers is the launch-target contract: how `wdc apply` starts,
// watches and stops workers (`wdc agent` processes) wherever a pool's
// provider puts them — local processes now, Ray and Kubernetes later.
//
// As in Terraform, every call takes a request struct and returns a response
// struct (LaunchRequest → LaunchResponse, StopRequest, StatusRequest →
// StatusResponse). Render gives the agent command line every provider runs,
// so `wdc plan` can show it without launching anything. The launch's
// one-time credential is never on that command line: providers pass it in
// the environment (protocol.LaunchCredentialEnv). Reclaimer stops what a
// dead apply left running, by what the provider recorded at launch.
//
// Provider packages register themselves from init (providers/local
// registers "local"); Lookup finds them by name and says clearly when a
// name is planned but not built (ray, kubernetes) or unknown. Every
// provider must pass the conformance suite in providers/providertest.
//
// This package launches workers; it does not decide how many (package
// engine plans that) and does not talk to them (they speak worker protocol
// v1 with the coordinator, package protocol).
package providers
