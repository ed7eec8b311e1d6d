// Package providertest is the conformance suite every provider must pass,
// and the fake agent its tests launch.
//
// The tests of package providers/builtin call Run for every provider the
// registry holds, each with a factory that returns the provider and a
// LaunchRequest whose Executable starts FakeAgent (for local: the test
// binary itself, re-executed with FakeAgentEnv set, its TestMain calling
// FakeAgent). The suite reads the fake agent's Report from req.LogPath, so
// the worker's output must reach that file on the machine running the
// test. It also checks the provider's registration: registered under its
// Name, keeping the promises of its providers.Info, rendering and
// dry-running a launch as its capabilities say without launching anything
// or showing the credential.
package providertest
