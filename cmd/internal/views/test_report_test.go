package views

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/wdctest"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

func TestTestLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		got, want string
	}{
		{TestRunLine(&wdctest.RunResult{Name: "a", Status: wdctest.StatusPass, Duration: 420 * time.Millisecond}), `  run "a"... pass (0.4s)`},
		{TestRunLine(&wdctest.RunResult{Name: "b", Status: wdctest.StatusError, Duration: 12340 * time.Millisecond}), `  run "b"... error (12.3s)`},
		{TestRunLine(&wdctest.RunResult{Name: "c", Status: wdctest.StatusFail, Duration: 2 * time.Minute}), `  run "c"... fail (2m0s)`},
		{FormatRunTime(123 * time.Second), "2m3s"},
		{TestSummaryLine(&wdctest.Result{Passed: 2, Duration: time.Second}), "Success! 2 passed, 0 failed, in 1.0s."},
		{TestSummaryLine(&wdctest.Result{Passed: 1, Failed: 1, Errored: 1, Duration: time.Second}), "Failure! 1 passed, 1 failed, 1 errored, in 1.0s."},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestWriteJUnit(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	file := &wdchcl.TestFile{Path: "tests/a.wdctest.hcl"}
	res := &wdctest.Result{Started: at, Duration: 2 * time.Second, Files: []*wdctest.FileResult{{File: file, Started: at, Duration: 2 * time.Second, Runs: []*wdctest.RunResult{
		{Name: "ok", Status: wdctest.StatusPass, Started: at, Duration: time.Second, Asserts: 1},
		{Name: "no", Status: wdctest.StatusFail, Started: at, Duration: time.Second, Asserts: 2, Failures: []*wdctest.Failure{{Message: "m"}}},
		{Name: "err", Status: wdctest.StatusError, Started: at, Diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid value"}}},
	}}}}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, res, func(r *wdctest.RunResult) string { return "why ]]> " + r.Name + "\n" }); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	s := doc.Suites[0]
	if doc.Tests != 3 || doc.Failures != 1 || doc.Errors != 1 || s.Name != "tests/a.wdctest.hcl" || s.Timestamp != "2026-12-02T19:00:00" || s.Time != "2.000" {
		t.Fatalf("document %+v", doc)
	}
	if c := s.Cases[1]; c.Failure == nil || c.Failure.Message != "1 of 2 assertions failed" || c.Failure.Body != "why ]]> no\n" || c.Classname != file.Path {
		t.Fatalf("failed case %+v", c)
	}
	if c := s.Cases[2]; c.Error == nil || c.Error.Message != "Invalid value" || c.Failure != nil {
		t.Fatalf("errored case %+v", c)
	}
	if c := s.Cases[0]; c.Error != nil || c.Failure != nil || !strings.Contains(buf.String(), `<testcase name="ok"`) {
		t.Fatalf("passed case %+v", c)
	}
}
