// Package artifact owns the blobs of the work folder's artifact store: the
// task logs and outputs that workers upload to the coordinator, kept by
// content in a folder the caller names (normally <work>/artifacts).
//
// What it owns:
//
//   - naming: a blob is the regular file sha256/<h[0:2]>/<h>, where h is
//     the SHA-256 of its bytes as 64 lowercase hex digits (ParseHash). The
//     name says what the bytes are and nothing about where they came from;
//   - atomic ingest (Store.Put): the bytes are streamed into a file under
//     tmp/ while being hashed, checked against the hash the uploader
//     claimed, synced, and renamed into place, so that a reader sees a
//     whole blob or none. A failed Put leaves nothing behind;
//   - deduplication: a blob already held is not written again;
//   - the size cap: the largest blob a Store takes, in bytes, given to
//     Open (sizes are written as ParseSize reads them, e.g. "10MiB");
//   - reading and listing (Stat, Open, Missing, Walk), removing one blob
//     (Remove), and removing temporary files left by a crash (CleanTemp).
//
// What it does not own: which blobs an attempt refers to (the accepted
// result's artifacts, by kind, name and hash) lives in the state, package
// state; the HTTP route that receives uploads, and the order of checks
// around it (fencing before ingest), live in package engine; so does
// garbage collection, which decides which blobs are no longer referred to
// and calls Remove. This package keeps no global state and never decides
// on its own that a blob is garbage.
package artifact
