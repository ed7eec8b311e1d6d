// Package builtin imports every provider built into wdc, so that each
// registers itself with package providers: a program that imports builtin
// can look up every built-in provider by name (cmd/wdc does). It owns
// nothing else; the registry is package providers'.
//
// Its tests run the conformance suite (providers/providertest) against
// every provider the registry holds, and check that the registry gives the
// configuration language (package hcl) every built-in provider with its
// own schema, and what the language then does with each one's block.
// A new built-in provider is imported in builtin.go and given a factory in
// conformance_test.go; the tests fail until it has both.
package builtin
