package coordinator

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// What a proposal is, beside its record in the state: its address, the
// settings and definition it recorded, how an apply runs it, how
// listings name its origin, and what a decision of it may say.

// ProposalSettings are the scheduling settings of a proposal's rendered
// task, kept as the proposal's settings (JSON) beside its definition: what
// a run of it needs beyond protocol.Definition. Durations are milliseconds.
type ProposalSettings struct {
	Placement    map[string]string `json:"placement"`
	TimeoutMS    int64             `json:"timeout_ms"`
	LeaseGraceMS int64             `json:"lease_grace_ms"`
	MaxAttempts  int               `json:"max_attempts"`
	MaxLost      int               `json:"max_lost"`
	BackoffMS    int64             `json:"backoff_ms"`
	MaxBackoffMS int64             `json:"max_backoff_ms"`
	// DirSet is true when the task sets dir; without it, the task runs in
	// the configuration directory (or its attempt's directory when it
	// declares outputs), as any task.
	DirSet bool `json:"dir_set"`
}

// ProposalID returns N of a proposal's address, "proposal.N".
func ProposalID(addr string) (int64, bool) {
	s, ok := strings.CutPrefix(addr, "proposal.")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 || strconv.FormatInt(id, 10) != s {
		return 0, false
	}
	return id, true
}

// ProposalDefinition decodes the definition a proposal recorded (its hash
// is p.DefHash). Errors: a recorded definition that does not decode.
func ProposalDefinition(p state.Proposal) (protocol.Definition, error) {
	var d protocol.Definition
	if err := json.Unmarshal(p.Spec, &d); err != nil {
		return protocol.Definition{}, fmt.Errorf("%s: its recorded definition does not decode: %w", p.Address(), err)
	}
	return d, nil
}

// ProposalRuntime is how an apply runs an approved proposal: its recorded
// definition and settings, with a relative dir taken from cfgDir, the
// configuration directory of the apply.
func ProposalRuntime(p state.Proposal, cfgDir string) (TaskRuntime, error) {
	d, err := ProposalDefinition(p)
	if err != nil {
		return TaskRuntime{}, err
	}
	var s ProposalSettings
	if err := json.Unmarshal(p.Settings, &s); err != nil {
		return TaskRuntime{}, fmt.Errorf("%s: its recorded settings do not decode: %w", p.Address(), err)
	}
	workDir := ""
	if !d.RunsInAttemptDir() {
		workDir = d.Dir
		if !filepath.IsAbs(workDir) {
			workDir = filepath.Join(cfgDir, filepath.FromSlash(workDir))
		}
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return TaskRuntime{
		Address: p.Address(), DefHash: p.DefHash, Definition: d, WorkDir: workDir, DefaultDir: !s.DirSet, InputRoot: cfgDir,
		Placement: s.Placement, Timeout: ms(s.TimeoutMS), LeaseGrace: ms(s.LeaseGraceMS),
		Retry: RetryPolicy{MaxAttempts: max(s.MaxAttempts, 1), MaxLost: s.MaxLost, Backoff: ms(s.BackoffMS), MaxBackoff: ms(s.MaxBackoffMS),
			Immediate: s.BackoffMS == 0},
	}, nil
}

// ProposalOrigin says where a proposal came from and who decided it, as
// plans and listings print it: "task.ci_rerun proposed by
// task.ci_doctor attempt 2 via edge.flake_rerun, approved by alice".
func ProposalOrigin(p state.Proposal) string {
	s := fmt.Sprintf("%s proposed by %s attempt %d via edge.%s", p.Propose, p.SourceTask, p.SourceAttempt, p.Edge)
	switch p.Status {
	case state.ProposalApproved:
		s += ", approved by " + p.DecidedBy
	case state.ProposalAutoApproved:
		s += ", approved by the edge (" + p.Earned + ")"
	case state.ProposalRejected:
		s += ", rejected by " + p.DecidedBy + ": " + p.Reason
	case state.ProposalPending:
		s += ", waiting for approval"
	}
	return s
}

// CheckDecisionText refuses who decided a proposal, or why, when it is
// blank, longer than 500 bytes, or holds a character that is not graphic
// (a newline would start a line of its own in a plan someone reviews; a
// bidirectional override would make it read otherwise): what is the name,
// "--by" or "--reason".
func CheckDecisionText(what, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%s is blank", what)
	case len(s) > 500:
		return fmt.Errorf("%s is longer than 500 bytes", what)
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return fmt.Errorf("%s holds the character %s, which is not printable: write it on one line, with letters, digits, punctuation and spaces", what, strconv.QuoteRuneToASCII(r))
		}
	}
	return nil
}
