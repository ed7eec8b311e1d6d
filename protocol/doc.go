// Package protocol holds what the coordinator and its workers must agree on
// byte for byte: the canonical task definition and its definition hash
// (def_hash), and — as worker protocol v1 grows — the wire types of the HTTP
// API described in docs/protocol.md and the client the agent uses.
//
// It owns no state and no configuration language: the engine builds a
// Definition from a decoded configuration, and the state package stores the
// definition bytes and hash this package computes.
package protocol
