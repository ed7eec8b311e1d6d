// Package backend keeps a wdc state in an object store, so that the state
// outlives the machine an apply ran on (a CI runner): the S3 backend
// (any S3-compatible store) and its lock object.
//
// # What it owns, and what it does not
//
// It owns the store's side: the client (github.com/minio/minio-go/v7,
// which signs the requests), the credentials (from the environment or a
// profile, never from the configuration), the state object (read with
// its ETag; written only with a conditional PUT, If-None-Match: * for a
// key that holds nothing, If-Match on the ETag read before), and the lock
// object beside it (KEY.lock, a JSON document: docs/json.md, "The backend
// lock object"), taken with a conditional create, renewed and released
// with conditional writes on its ETag, and judged on the wall clock; and
// the blobs (KEY.blobs/SHA256), each written once, listed and removed
// (wdc gc decides which); and the object of the state's own CA (KEY.ca,
// created once with a conditional create), whose content package tlsca
// makes and reads.
//
// It does not own the state's content: the SQLite file is package state's
// (state.Copy makes the consistent copy that is uploaded), and this
// package moves files without opening them. Nor does it decode the
// configuration (package hcl gives the backend block's settings), nor
// run the apply (cmd/wdc pulls the state into a local working copy, runs
// the apply on it under this lock, and pushes it back).
package backend
