// Package agentcli is the command line of a worker, shared by the two
// binaries that can be one: wdc (as `wdc agent` and `wdc version`) and
// wdc-agent, the worker alone, which is what pods and Ray jobs run. Both
// take the agent command from here (AgentCmd), so `wdc-agent agent …`
// accepts exactly the arguments of `wdc agent …` and a launch's
// `<command> agent --server …` runs on either.
//
// It owns: the agent command's flags, how a worker finds its credential
// and CA fingerprint (a join file, WDC_LAUNCH_CREDENTIAL, WDC_CA_SHA256:
// Credential), the agent's signal handling (drain on the first SIGTERM or
// SIGINT, exit on the second), rejoining with a join file, the version
// command (VersionCmd: the version and commit a main package was stamped
// with by -ldflags "-X main.Version=… -X main.Commit=…"), and wdc-agent's
// root command and exit codes (Main: 0 on success, 1 on any error, a parse
// error included).
//
// It does not own the worker runtime (package agent: registration,
// heartbeats, claims, attempts) nor the protocol (package protocol), and
// it imports nothing of the configuration language, the state, the engine
// or the providers: a binary made of it alone carries no client-go and no
// HCL. wdc's other commands live in cmd/wdc.
package agentcli
