package ray

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// Metadata keys wdc puts on every job it submits, so it finds them again
// (at the end of an apply, and after an apply died) and nothing else.
const (
	MetaManagedBy = "wdc.managed-by" // "wdc"
	MetaLineage   = "wdc.lineage"
	MetaApplyID   = "wdc.apply-id"
	MetaPool      = "wdc.pool"
	MetaLaunchSeq = "wdc.launch-seq"
	managedBy     = "wdc"
)

// SubmissionID returns the submission id of a launch:
// "wdc-<pool>-<seq>-<hash>", hash the first 10 hex digits of the SHA-256
// of lineage, apply id, pool and sequence, so it is unique per launch and
// the same when a launch is retried. The pool's name is cut to 40
// characters and limited to [A-Za-z0-9_-] (the hash keeps it unique).
func SubmissionID(lineage, applyID, pool string, seq int) string {
	sum := sha256.Sum256([]byte(lineage + "/" + applyID + "/" + pool + "/" + strconv.Itoa(seq)))
	p := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '-'
	}, pool)
	if len(p) > 40 {
		p = p[:40]
	}
	return "wdc-" + p + "-" + strconv.Itoa(seq) + "-" + hex.EncodeToString(sum[:])[:10]
}

// agentRequest is req with the Ray nodes' wdc binary, or, for a pool
// without wdc_path, the packaged agent in the job's working folder.
func agentRequest(req providers.LaunchRequest, s *Settings) providers.LaunchRequest {
	req.Executable = s.WdcPath
	if s.WdcPath == "" {
		req.Executable = "./" + packagedAgent
	}
	return req
}

// ShellQuote quotes one argument for a POSIX shell: Ray runs an
// entrypoint with shell=True, so every argument is single-quoted unless
// it holds only characters no shell treats specially.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Entrypoint joins argv into the shell command Ray runs, quoting each
// argument (ShellQuote).
func Entrypoint(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// Submission builds the job submission of one launch from the pool's ray
// block and the request: the entrypoint runs `wdc agent` (providers.Render
// with the block's wdc_path, or ./wdc-agent from the agent's package,
// workingDir, when it has none), runtime_env.env_vars holds the block's
// env, req.Env and the launch credential (WDC_LAUNCH_CREDENTIAL; nowhere
// else), runtime_env.working_dir the package, and metadata the block's
// and wdc's own keys (Meta*).
func Submission(req providers.LaunchRequest, s *Settings, workingDir string) JobSubmission {
	env := maps.Clone(s.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	env[protocol.LaunchCredentialEnv] = req.Credential
	meta := maps.Clone(s.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, launchMetadata(req))
	return JobSubmission{
		Entrypoint:          Entrypoint(providers.Render(agentRequest(req, s))),
		SubmissionID:        SubmissionID(req.Lineage, req.ApplyID, req.Pool, req.Seq),
		RuntimeEnv:          &RuntimeEnv{WorkingDir: workingDir, EnvVars: env},
		Metadata:            meta,
		EntrypointNumCPUs:   s.EntrypointNumCPUs,
		EntrypointNumGPUs:   s.EntrypointNumGPUs,
		EntrypointMemory:    s.EntrypointMemory,
		EntrypointResources: maps.Clone(s.EntrypointResources),
	}
}

// launchMetadata are wdc's own metadata keys of a launch.
func launchMetadata(req providers.LaunchRequest) map[string]string {
	return map[string]string{MetaManagedBy: managedBy, MetaLineage: req.Lineage, MetaApplyID: req.ApplyID,
		MetaPool: req.Pool, MetaLaunchSeq: strconv.Itoa(req.Seq)}
}

// sameLaunch reports whether a job's metadata carries the launch's own
// keys.
func sameLaunch(got, want map[string]string) bool {
	for _, k := range []string{MetaManagedBy, MetaLineage, MetaApplyID, MetaPool, MetaLaunchSeq} {
		if got[k] != want[k] {
			return false
		}
	}
	return true
}

// Redacted returns the submission as indented JSON with every
// environment value replaced by "(sensitive)" when it is the credential.
func (s JobSubmission) Redacted() (string, error) {
	c := s
	if s.RuntimeEnv != nil {
		env := maps.Clone(s.RuntimeEnv.EnvVars)
		if _, ok := env[protocol.LaunchCredentialEnv]; ok {
			env[protocol.LaunchCredentialEnv] = "(sensitive)"
		}
		c.RuntimeEnv = &RuntimeEnv{WorkingDir: s.RuntimeEnv.WorkingDir, EnvVars: env}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", fmt.Errorf("ray: rendering the submission: %w", err)
	}
	return string(b) + "\n", nil
}

// envNames returns the names of the variables a submission sets, sorted.
func envNames(s JobSubmission) []string {
	if s.RuntimeEnv == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.RuntimeEnv.EnvVars))
}
