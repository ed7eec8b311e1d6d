package views

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/wdctest"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/plural"
)

// TestFormatVersion is the format_version of the test-result document.
const TestFormatVersion = "1.1"

// TestDoc is the document `wdc test --json` prints (docs/json.md, "The
// test-result document").
type TestDoc struct {
	FormatVersion   string         `json:"format_version"`
	WdcVersion      string         `json:"wdc_version"`
	Status          string         `json:"status"`
	StartedAt       string         `json:"started_at"`
	DurationSeconds float64        `json:"duration_seconds"`
	Summary         TestSummary    `json:"summary"`
	Files           []TestFileDoc  `json:"files"`
	Diagnostics     []DiagnosticJS `json:"diagnostics"`
}

// TestSummary counts the runs by status.
type TestSummary struct {
	Runs    int `json:"runs"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errored int `json:"errored"`
}

// TestFileDoc is one test file's runs.
type TestFileDoc struct {
	Path            string       `json:"path"`
	Status          string       `json:"status"`
	DurationSeconds float64      `json:"duration_seconds"`
	Runs            []TestRunDoc `json:"runs"`
}

// TestRunDoc is one run's result.
type TestRunDoc struct {
	Name            string           `json:"name"`
	Command         string           `json:"command"`
	Status          string           `json:"status"`
	StartedAt       string           `json:"started_at"`
	DurationSeconds float64          `json:"duration_seconds"`
	SkippedSeconds  float64          `json:"skipped_seconds"`
	Assertions      int              `json:"assertions"`
	Failures        []TestFailureDoc `json:"failures"`
	Faults          []TestFaultDoc   `json:"faults"`
	Diagnostics     []DiagnosticJS   `json:"diagnostics"`
	Error           *string          `json:"error"`
}

// TestFailureDoc is one assertion that did not hold, or a fault that
// never fired.
type TestFailureDoc struct {
	// Kind is "assertion", or "fault" for a fault block that never fired
	// (1.1).
	Kind        string              `json:"kind"`
	Range       RangeJS             `json:"range"`
	Message     string              `json:"message"`
	Values      []wdctest.Reference `json:"values"`
	Diagnostics []DiagnosticJS      `json:"diagnostics"`
}

// TestFaultDoc is what became of one fault block of a run (1.1).
type TestFaultDoc struct {
	Kind string `json:"kind"`
	// Target is the task's address, pool.NAME for fail_launch, "state"
	// for disk_full.
	Target string `json:"target"`
	// Attempt is the attempt the fault targets (0 for fail_launch).
	Attempt int     `json:"attempt"`
	Range   RangeJS `json:"range"`
	Fired   bool    `json:"fired"`
	Detail  string  `json:"detail"`
}

func faultTarget(f *wdchcl.TestFault) string {
	switch f.Kind {
	case wdchcl.FaultFailLaunch:
		return "pool." + f.Pool
	case wdchcl.FaultDiskFull:
		return "state"
	}
	return f.Task
}

// DiagnosticJS is a diagnostic in a JSON document.
type DiagnosticJS struct {
	Severity string   `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail"`
	Range    *RangeJS `json:"range"`
}

// RangeJS is a source range: file and start and end positions (lines and
// columns count from 1).
type RangeJS struct {
	Filename string `json:"filename"`
	Start    PosJS  `json:"start"`
	End      PosJS  `json:"end"`
}

// PosJS is a position in a file.
type PosJS struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func rangeJS(r hcl.Range) RangeJS {
	return RangeJS{Filename: r.Filename, Start: PosJS{r.Start.Line, r.Start.Column}, End: PosJS{r.End.Line, r.End.Column}}
}

// Diagnostics turns diagnostics into their JSON form ([] for none).
func Diagnostics(diags hcl.Diagnostics) []DiagnosticJS {
	out := []DiagnosticJS{}
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		j := DiagnosticJS{Severity: sev, Summary: Printable(d.Summary), Detail: d.Detail}
		if d.Subject != nil {
			r := rangeJS(*d.Subject)
			j.Range = &r
		}
		out = append(out, j)
	}
	return out
}

func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// NewTestDoc makes the test-result document of res; diags are the
// diagnostics of reading the test files (warnings, when it ran).
func NewTestDoc(res *wdctest.Result, diags hcl.Diagnostics, version string) *TestDoc {
	doc := &TestDoc{FormatVersion: TestFormatVersion, WdcVersion: version, Status: string(res.Status()),
		StartedAt: res.Started.UTC().Format(time.RFC3339Nano), DurationSeconds: seconds(res.Duration),
		Summary: TestSummary{Runs: res.Passed + res.Failed + res.Errored, Passed: res.Passed, Failed: res.Failed, Errored: res.Errored},
		Files:   []TestFileDoc{}, Diagnostics: Diagnostics(diags)}
	for _, f := range res.Files {
		fd := TestFileDoc{Path: f.File.Path, Status: string(f.Status()), DurationSeconds: seconds(f.Duration), Runs: []TestRunDoc{}}
		for _, r := range f.Runs {
			rd := TestRunDoc{Name: r.Name, Command: r.Command, Status: string(r.Status), StartedAt: r.Started.UTC().Format(time.RFC3339Nano),
				DurationSeconds: seconds(r.Duration), SkippedSeconds: seconds(r.Skipped), Assertions: r.Asserts, Failures: []TestFailureDoc{}, Faults: []TestFaultDoc{}, Diagnostics: Diagnostics(r.Diags)}
			if r.Err != nil {
				s := r.Err.Error()
				rd.Error = &s
			}
			for _, fl := range r.Failures {
				vals := fl.Values
				if vals == nil {
					vals = []wdctest.Reference{}
				}
				kind := "assertion"
				if fl.Fault {
					kind = "fault"
				}
				rd.Failures = append(rd.Failures, TestFailureDoc{Kind: kind, Range: rangeJS(fl.Range), Message: fl.Message, Values: vals, Diagnostics: Diagnostics(fl.Diags)})
			}
			for _, fr := range r.Faults {
				attempt := fr.Fault.Attempt
				if fr.Fault.Kind == wdchcl.FaultFailLaunch || fr.Fault.Kind == wdchcl.FaultDiskFull {
					attempt = 0
				}
				rd.Faults = append(rd.Faults, TestFaultDoc{Kind: fr.Fault.Kind, Target: faultTarget(fr.Fault), Attempt: attempt,
					Range: rangeJS(fr.Fault.DeclRange), Fired: fr.Fired, Detail: fr.Detail})
			}
			fd.Runs = append(fd.Runs, rd)
		}
		doc.Files = append(doc.Files, fd)
	}
	return doc
}

// The JUnit XML document `wdc test --junit-xml FILE` writes: one
// testsuite per test file, one testcase per run, a failure for an
// assertion that did not hold and an error for a run that could not be
// carried out (docs/cli.md, "wdc test"; docs/schema/junit.xsd).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Timestamp string        `xml:"timestamp,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",cdata"`
}

// junitTime is a duration in seconds, as JUnit writes it: "1.234".
func junitTime(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// junitTimestamp is a start time as JUnit writes it (no zone: UTC).
func junitTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }

// WriteJUnit writes res as a JUnit XML document. failureText renders what
// a failed or errored run's element says in its body (the lines `wdc
// test` prints under the run).
func WriteJUnit(w io.Writer, res *wdctest.Result, failureText func(*wdctest.RunResult) string) error {
	doc := junitSuites{Name: "wdc test", Time: junitTime(res.Duration)}
	for _, f := range res.Files {
		s := junitSuite{Name: f.File.Path, Time: junitTime(f.Duration), Timestamp: junitTimestamp(f.Started)}
		for _, r := range f.Runs {
			c := junitCase{Name: r.Name, Classname: f.File.Path, Time: junitTime(r.Duration), Timestamp: junitTimestamp(r.Started)}
			switch r.Status {
			case wdctest.StatusFail:
				n, faults := 0, 0
				for _, fl := range r.Failures {
					if fl.Fault {
						faults++
					} else {
						n++
					}
				}
				msg := fmt.Sprintf("%d of %d %s failed", n, r.Asserts, plural.Word(r.Asserts, "assertion", "assertions"))
				typ := "assertion"
				if faults > 0 {
					msg += fmt.Sprintf("; %s not injected", plural.Count(faults, "fault", "faults"))
					if n == 0 {
						typ = "fault"
					}
				}
				c.Failure = &junitProblem{Type: typ, Message: msg, Body: failureText(r)}
				s.Failures++
			case wdctest.StatusError:
				c.Error = &junitProblem{Type: "error", Message: runErrorMessage(r), Body: failureText(r)}
				s.Errors++
			}
			s.Tests++
			s.Cases = append(s.Cases, c)
		}
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Suites = append(doc.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// runErrorMessage is the one-line message of a run that could not be
// carried out, or whose assertion could not be evaluated.
func runErrorMessage(r *wdctest.RunResult) string {
	if r.Err != nil {
		return OneLine(r.Err.Error())
	}
	for _, d := range r.Diags {
		if d.Severity == hcl.DiagError {
			return OneLine(d.Summary)
		}
	}
	for _, f := range r.Failures {
		for _, d := range f.Diags {
			return "the assertion could not be evaluated: " + OneLine(d.Summary)
		}
	}
	return "the run could not be carried out"
}

// TestRunLine is a run's line of `wdc test`'s output: `  run "NAME"...
// pass (1.2s)`, or `pass (1.2s, 30m0s of waiting skipped)` when its test
// clock jumped.
func TestRunLine(r *wdctest.RunResult) string {
	st := "pass"
	switch r.Status {
	case wdctest.StatusFail:
		st = "fail"
	case wdctest.StatusError:
		st = "error" // it could not be carried out or judged
	}
	if r.Skipped > 0 {
		return fmt.Sprintf("  run %q... %s (%s, %s of waiting skipped)", r.Name, st, FormatRunTime(r.Duration), r.Skipped.Round(time.Second))
	}
	return fmt.Sprintf("  run %q... %s (%s)", r.Name, st, FormatRunTime(r.Duration))
}

// FormatRunTime is a run's time as the output shows it: "0.4s", "12.3s",
// "2m3s".
func FormatRunTime(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// TestSummaryLine is the last line of `wdc test`'s output.
func TestSummaryLine(res *wdctest.Result) string {
	word := "Success!"
	if res.Status() != wdctest.StatusPass {
		word = "Failure!"
	}
	parts := []string{fmt.Sprintf("%d passed", res.Passed), fmt.Sprintf("%d failed", res.Failed)}
	if res.Errored > 0 {
		parts = append(parts, fmt.Sprintf("%d errored", res.Errored))
	}
	return fmt.Sprintf("%s %s, in %s.", word, strings.Join(parts, ", "), FormatRunTime(res.Duration))
}
