// Package httpapi is the coordinator's HTTP face: worker protocol v1 and
// the operator routes (docs/protocol.md), served by the handler New
// returns. It owns the routes, the protocol version header, reading and
// decoding request bodies (Decode*Request: exactly one JSON object,
// bounded, checked), the bearer credential and which kinds of credential
// each route takes, streaming logs and artifacts, the Prometheus route,
// and the answers: each refusal of the coordinator (*coordinator.Error)
// and each typed error of the state becomes its status and a
// protocol.Error body.
//
// It does not own what a request does: the leases, results, credentials,
// sweeps and judgements are package coordinator's operations, which know
// nothing of HTTP. A request that reaches an operation has been
// authenticated and checked; nothing reaches the state before.
package httpapi
