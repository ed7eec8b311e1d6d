// Package providertest is the conformance suite every provider must pass,
// and the fake agent its tests launch.
//
// A provider's test calls Run with a factory that returns the provider and
// a LaunchRequest whose Executable starts FakeAgent (for local: the test
// binary itself, re-executed with FakeAgentEnv set, its TestMain calling
// FakeAgent). The suite reads the fake agent's Report from req.LogPath, so
// the worker's output must reach that file on the machine running the test.
package providertest
