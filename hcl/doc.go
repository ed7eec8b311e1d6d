// Package hcl is wdc's configuration language: it loads a directory of
// *.wdc.hcl files into typed values (Config, Pool, Task, …).
//
// What it owns:
//
//   - parsing every *.wdc.hcl file of one directory (sorted, not recursive,
//     skipping hidden and editor files: .*, #*, *~, *#) and the --var-file
//     files, keeping them in Config.Files so callers can
//     print diagnostics with source snippets
//     (hcl.NewDiagnosticTextWriter(w, cfg.Files, width, color));
//   - input variables (type constraints, defaults, WDC_VAR_NAME, --var-file,
//     --var, in that increasing precedence), locals evaluated in dependency
//     order, path.root, count and count.index, and the function library;
//   - decoding the wdc, variable, locals, pool, task and edge blocks,
//     applying the defaults of the language (see the Default… constants);
//   - proposed_only tasks (Config.ProposedTasks) and the edges that map a
//     task's recommendations to them: checking them at load time with an
//     unknown proposal of each edge's input type, converting a
//     recommendation's JSON input (Edge.ConvertInput) and rendering the
//     task instance of an approved proposal (Config.RenderProposal). Which
//     proposals exist, and which are approved, is the state's and the
//     engine's business;
//   - language-level validation: unknown blocks and arguments, types,
//     ranges (min ≤ max, counts, durations), duplicate names, provider
//     names (against the providers it is given, Inputs.Providers), at most
//     one provider block per pool and named like its provider, task
//     addresses in depends_on, dependency cycles. Every error is an
//     hcl.Diagnostic with a source range, and the decoded values keep their
//     ranges (DeclRange, PlacementRange, …) so later stages can point at
//     the configuration too;
//   - handing each pool's provider block (kubernetes { }, ray { },
//     local { }) to its provider as an HCL body (ProviderBlock), with the
//     evaluation every other block gets, and keeping the settings the
//     provider returns (Pool.Settings) and the diagnostics it reports, in
//     order, sensitive values scrubbed;
//   - test files (*.wdctest.hcl in the configuration directory and its
//     tests folder: LoadTestFiles, ParseTestFile): their run blocks, each
//     with its command, variables, override_pool and assert blocks, with
//     their ranges, and the checks of them against a configuration
//     (CheckTestFile). A run's variables and pool overrides reach Load as
//     Inputs.TestVariables and Inputs.PoolProviders. Running them and
//     evaluating the assertions is package engine/wdctest's.
//
// What it does not do: it knows nothing of SQLite or the state file (the
// Settings it returns are only what the wdc block says; the caller applies
// flag > environment > block > default), it does not plan or compute
// definition hashes, and it does not match placement against pool labels
// (engine does that, using Task.PlacementRange for its errors). It knows
// no provider by itself: which providers exist, their defaults
// (ProviderSchema) and what their blocks hold belong to package providers
// and the provider packages, which declare each block's schema, check it
// and decode it into their own settings type; so the language imports no
// Kubernetes package.
//
// Load never panics; on errors it still returns a Config, possibly partial.
package hcl
