package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/doctor"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/plural"
)

// Doctor's exit codes (docs/cli.md, "Exit codes"): 0 when it found
// nothing (notes aside), these when it found problems, 1 when it could not
// run.
const (
	doctorExitWarnings = 3
	doctorExitErrors   = 4
)

// doctorFormatVersion is the format_version of the doctor document
// (docs/json.md, docs/schema/doctor.schema.json).
const doctorFormatVersion = "1.2"

// DoctorCmd checks the state file and what it records, and says what is
// wrong and what to do. It never writes the state.
type DoctorCmd struct {
	JSON               bool          `name:"json" help:"Print one JSON document (docs/json.md) instead of text."`
	PlacementThreshold time.Duration `name:"placement-threshold" default:"60s" placeholder:"DURATION" help:"Report a queued task that no live worker can run once it has waited this long."`
}

// doctorDoc is the document `wdc doctor --json` prints.
type doctorDoc struct {
	FormatVersion             string              `json:"format_version"`
	WDCVersion                string              `json:"wdc_version"`
	StatePath                 string              `json:"state_path"`
	CheckedAt                 time.Time           `json:"checked_at"`
	PlacementThresholdSeconds float64             `json:"placement_threshold_seconds"`
	Checks                    []doctorCheckJSON   `json:"checks"`
	Findings                  []doctorFindingJSON `json:"findings"`
	Summary                   doctorSummaryJSON   `json:"summary"`
}

type doctorCheckJSON struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

type doctorFindingJSON struct {
	Check    string   `json:"check"`
	Severity string   `json:"severity"`
	Subject  string   `json:"subject,omitempty"`
	Message  string   `json:"message"`
	Details  []string `json:"details"`
	Fix      string   `json:"fix,omitempty"`
}

type doctorSummaryJSON struct {
	Errors   int    `json:"errors"`
	Warnings int    `json:"warnings"`
	Notes    int    `json:"notes"`
	ExitCode int    `json:"exit_code"`
	Text     string `json:"text"`
}

// Run runs every check and prints the report. Exit codes: 0 when nothing
// was found, 3 with warnings (and no errors), 4 with errors, 1 when doctor
// could not run.
func (c *DoctorCmd) Run(e *env) error {
	if c.PlacementThreshold <= 0 {
		return fmt.Errorf("--placement-threshold must be positive, have %s", c.PlacementThreshold)
	}
	dir, err := e.configDir()
	if err != nil {
		return err
	}
	cfg, noConfig := e.loadOptionalConfig(dir)
	path, err := e.readingPath(cfg)
	if err != nil {
		return err
	}
	var placementCfg *wdchcl.Config
	if noConfig == "" {
		placementCfg = cfg
	}
	now := e.now()
	report, err := doctor.Run(context.Background(), doctor.Options{
		StatePath:          path,
		WorkDir:            filepath.Dir(path),
		Config:             placementCfg,
		NoConfig:           noConfig,
		PlacementThreshold: c.PlacementThreshold,
		Now:                now,
	})
	if err != nil {
		return err
	}
	doc := newDoctorDoc(report, c.PlacementThreshold, now)
	if c.JSON {
		err = views.WriteJSON(e.stdout, doc)
	} else {
		err = renderDoctor(e.stdout, doc)
	}
	if err != nil {
		return err
	}
	if doc.Summary.ExitCode != 0 {
		return errExit{doc.Summary.ExitCode}
	}
	return nil
}

func newDoctorDoc(r *doctor.Report, threshold time.Duration, now time.Time) *doctorDoc {
	doc := &doctorDoc{
		FormatVersion:             doctorFormatVersion,
		WDCVersion:                Version,
		StatePath:                 r.StatePath,
		CheckedAt:                 now.UTC(),
		PlacementThresholdSeconds: threshold.Seconds(),
		Checks:                    []doctorCheckJSON{},
		Findings:                  []doctorFindingJSON{},
	}
	for _, c := range r.Checks {
		doc.Checks = append(doc.Checks, doctorCheckJSON{ID: c.ID, Title: c.Title, Status: string(c.Status), Note: c.Note})
	}
	for _, f := range r.Findings {
		details := f.Details
		if details == nil {
			details = []string{}
		}
		doc.Findings = append(doc.Findings, doctorFindingJSON{Check: f.Check, Severity: string(f.Severity), Subject: f.Subject,
			Message: f.Message, Details: details, Fix: f.Fix})
	}
	s := &doc.Summary
	s.Errors, s.Warnings, s.Notes = r.Count(doctor.SeverityError), r.Count(doctor.SeverityWarning), r.Count(doctor.SeverityInfo)
	switch {
	case s.Errors > 0:
		s.ExitCode = doctorExitErrors
	case s.Warnings > 0:
		s.ExitCode = doctorExitWarnings
	}
	switch {
	case s.Errors+s.Warnings == 0:
		s.Text = "No problems found."
	case s.Warnings == 0:
		s.Text = fmt.Sprintf("Found %s.", plural.Count(s.Errors, "error", "errors"))
	case s.Errors == 0:
		s.Text = fmt.Sprintf("Found %s.", plural.Count(s.Warnings, "warning", "warnings"))
	default:
		s.Text = fmt.Sprintf("Found %s and %s.", plural.Count(s.Errors, "error", "errors"), plural.Count(s.Warnings, "warning", "warnings"))
	}
	return doc
}

// renderDoctor prints the findings, each with what to do, then every
// check's outcome and the summary line.
func renderDoctor(w io.Writer, doc *doctorDoc) error {
	fmt.Fprintf(w, "wdc doctor: state file %s\n", doc.StatePath)
	for _, f := range doc.Findings {
		label := map[string]string{"error": "Error", "warning": "Warning", "info": "Note"}[f.Severity]
		fmt.Fprintf(w, "\n%s: [%s] %s\n", label, f.Check, f.Message)
		for _, d := range f.Details {
			fmt.Fprintf(w, "    %s\n", d)
		}
		if f.Fix != "" {
			fmt.Fprintf(w, "  To fix: %s\n", f.Fix)
		}
	}
	fmt.Fprintln(w, "\nChecks:")
	var table bytes.Buffer
	tw := views.NewTable(&table)
	for _, c := range doc.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Status, c.ID, c.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		// A check without a note leaves the padding of its column.
		if t := strings.TrimRight(line, " \n"); t != "" {
			fmt.Fprintln(w, t)
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", doc.Summary.Text)
	return err
}
