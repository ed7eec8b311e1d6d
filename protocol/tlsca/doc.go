// Package tlsca owns the coordinator's TLS identity when the user supplies
// no certificate of their own, and the check an agent makes against it:
//
//   - a certificate authority per state (CA, New, LoadOrCreate): an ECDSA
//     P-256 key and a self-signed CA certificate valid for ten years, kept
//     as ca.key and ca.crt in a folder the caller names, or as one PEM
//     bundle of both (Bundle, ParseBundle) that the caller keeps where it
//     likes (a state in a backend keeps it in the bucket, beside the
//     state);
//   - a fresh server certificate for each apply (CA.IssueServer), signed by
//     that CA, for the host names and addresses DefaultHosts lists;
//   - the pin: the lowercase hex SHA-256 of a certificate's DER bytes
//     (Fingerprint, ParseFingerprint), which the user gives an agent as
//     --ca-sha256;
//   - the agent's side (ClientConfig): a tls.Config that accepts the
//     server only if a certificate in the chain it presents has the pinned
//     fingerprint, the leaf chains to that certificate, and the leaf is
//     valid for the host being dialled. Verification is never skipped.
//
// It does not decide where the files live (the caller passes the folder,
// normally inside the work folder), when to serve HTTPS rather than HTTP,
// or how a user-supplied certificate is loaded: those belong to the
// commands that listen and dial. It keeps no global state and reads the
// clock only where a function says so; IssueServer takes the time as a
// parameter.
package tlsca
