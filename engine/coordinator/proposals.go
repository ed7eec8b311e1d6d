package coordinator

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	wdchcl "github.com/wdc-dev/wdc/hcl"
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
// definition and settings, with a relative dir taken from cfg.Dir, the
// configuration directory of the apply. The values of the definition's
// sensitive parts, which the state does not keep, come from rendering the
// proposed task again with cfg (RevealProposal, key the state's hash
// key); a configuration that no longer renders them is an error that
// says so.
func ProposalRuntime(p state.Proposal, cfg *wdchcl.Config, key []byte) (TaskRuntime, error) {
	d, err := ProposalDefinition(p)
	if err != nil {
		return TaskRuntime{}, err
	}
	if len(d.Sensitive) > 0 {
		if d, err = RevealProposal(p, cfg, key); err != nil {
			return TaskRuntime{}, err
		}
	}
	cfgDir := cfg.Dir
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

// RevealProposal returns the definition of p's task with the values of its
// sensitive parts, which the state keeps only as keyed hashes: its proposed
// task rendered again from cfg with the input and source p recorded. The
// rendering must give p's definition hash under key, the state's hash key;
// an error says what to do when it does not (the edge or the task left the
// configuration, or a value it is computed from changed).
func RevealProposal(p state.Proposal, cfg *wdchcl.Config, key []byte) (protocol.Definition, error) {
	stored, err := ProposalDefinition(p)
	if err != nil {
		return protocol.Definition{}, err
	}
	parts := make([]string, 0, len(stored.Sensitive))
	for part := range stored.Sensitive {
		parts = append(parts, part)
	}
	sort.Strings(parts)
	why := fmt.Sprintf("%s: the sensitive values of its task, %s, are not kept in the state, and this configuration does not render them as they were when it was proposed",
		p.Address(), stored.DescribeParts(parts))
	fix := fmt.Sprintf("give those variables their values again, or reject it (wdc reject %d --reason TEXT)", p.ID)
	var edge *wdchcl.Edge
	for _, e := range cfg.Edges {
		if e.Name == p.Edge {
			edge = e
		}
	}
	if edge == nil {
		return protocol.Definition{}, fmt.Errorf("%s (edge.%s is not in it): %s", why, p.Edge, fix)
	}
	input, err := edge.ConvertInput(p.Input)
	if err != nil {
		return protocol.Definition{}, fmt.Errorf("%s (its input does not fit edge.%s: %v): %s", why, p.Edge, err, fix)
	}
	t, diags := cfg.RenderProposal(edge, input, wdchcl.ProposalSource{Task: p.SourceTask, Attempt: p.SourceAttempt})
	if diags.HasErrors() {
		return protocol.Definition{}, fmt.Errorf("%s (%s does not render: %s): %s", why, p.Propose, diagText(diags), fix)
	}
	d := proposedDefinition(cfg.Dir, t, key)
	if protocol.DefinitionHash(d, nil) != p.DefHash {
		return protocol.Definition{}, fmt.Errorf("%s: %s", why, fix)
	}
	return d, nil
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
