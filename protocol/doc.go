// Package protocol holds what the coordinator and its workers must agree on
// byte for byte: the canonical task definition and its definition hash
// (def_hash), with the parts computed from a sensitive variable stored as a
// placeholder and a keyed hash (sensitive.go), and — as worker protocol v1 grows — the wire types of the HTTP
// API described in docs/protocol.md and the client the agent uses. It also
// names the environment variables that carry credentials to a worker, and
// which of a process's variables are credentials (IsSecretEnv): the agent
// keeps them from its attempts and the providers from their workers.
//
// It owns no state and no configuration language: the engine builds a
// Definition from a decoded configuration, and the state package stores the
// definition bytes and hash this package computes.
package protocol
