package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wdc-dev/wdc/cmd/internal/views"
)

// testCmdConfig is a configuration whose test file has plan runs that
// pass, fail and cannot be carried out (no worker is launched).
const testCmdConfig = `
variable "shards" {
  type    = number
  default = 2
}

pool "cpu" {
  provider = "local"
}

task "shard" {
  count   = var.shards
  command = ["true"]
}
`

const testCmdTests = `run "passes" {
  command = plan

  assert {
    condition     = plan.changes == 2
    error_message = "two shards"
  }
}

run "fails" {
  command = plan

  variables {
    shards = 3
  }

  assert {
    condition     = plan.changes == 2 && length(task.shard) == 2
    error_message = "two shards, and there are ${plan.changes}"
  }
}

run "errors" {
  command = plan

  variables {
    shards = "many"
  }
}

run "cannot_evaluate" {
  command = plan

  assert {
    condition     = task.shard[7].status == ""
    error_message = "no such shard"
  }
}
`

// writeTestConfig writes testCmdConfig and its test file into a new
// folder.
func writeTestConfig(t *testing.T) string {
	t.Helper()
	dir := writeConfig(t, testCmdConfig)
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "plan.wdctest.hcl"), []byte(testCmdTests), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSchemaTest validates `wdc test --json` against test.schema.json, and
// checks that the schema refuses what it should.
func TestSchemaTest(t *testing.T) {
	t.Parallel()
	sch := loadSchema(t, "test.schema.json")
	dir := writeTestConfig(t)
	out, stderr, code := runWDC(t, "--chdir", dir, "test", "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	validateDoc(t, sch, "test --json", []byte(out))
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["status"] != "error" || doc["format_version"] != views.TestFormatVersion {
		t.Fatalf("status %v, format_version %v", doc["status"], doc["format_version"])
	}
	runs := doc["files"].([]any)[0].(map[string]any)["runs"].([]any)
	var statuses []string
	for _, r := range runs {
		statuses = append(statuses, r.(map[string]any)["status"].(string))
	}
	if got := strings.Join(statuses, " "); got != "pass fail error error" {
		t.Fatalf("statuses %s", got)
	}
	fail := runs[1].(map[string]any)["failures"].([]any)[0].(map[string]any)
	if fail["message"] != "two shards, and there are 3" {
		t.Errorf("message %v", fail["message"])
	}
	passed, _, code := runWDC(t, "--chdir", dir, "test", "--json", "--filter", "passes")
	if code != 0 {
		t.Fatalf("--filter passes: exit %d", code)
	}
	validateDoc(t, sch, "test --json --filter passes", []byte(passed))
	for _, m := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"an unknown status", func(d map[string]any) { d["status"] = "skipped" }},
		{"an unknown command", func(d map[string]any) {
			d["files"].([]any)[0].(map[string]any)["runs"].([]any)[0].(map[string]any)["command"] = "destroy"
		}},
		{"a failure without values", func(d map[string]any) {
			delete(d["files"].([]any)[0].(map[string]any)["runs"].([]any)[1].(map[string]any)["failures"].([]any)[0].(map[string]any), "values")
		}},
		{"no format_version", func(d map[string]any) { delete(d, "format_version") }},
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
	} {
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		m.mutate(doc)
		b, _ := json.Marshal(doc)
		if err := checkDoc(sch, b); err == nil {
			t.Errorf("the test schema accepts a document with %s", m.name)
		}
	}
}

// TestJUnitSchema validates the JUnit file of `wdc test --junit-xml`
// against docs/schema/junit.xsd with xmllint (libxml2-utils; .ci/run
// installs it), and checks that the schema refuses what it should.
func TestJUnitSchema(t *testing.T) {
	t.Parallel()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no xmllint (apt-get install libxml2-utils)")
		}
		t.Skip("no xmllint to validate with (apt-get install libxml2-utils)")
	}
	xsd, err := filepath.Abs(filepath.Join("..", "..", "docs", "schema", "junit.xsd"))
	if err != nil {
		t.Fatal(err)
	}
	dir := writeTestConfig(t)
	if _, stderr, code := runWDC(t, "--chdir", dir, "test", "--junit-xml", "junit.xml"); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	file := filepath.Join(dir, "junit.xml")
	lint := func(path string) error {
		out, err := exec.Command(xmllint, "--noout", "--schema", xsd, path).CombinedOutput()
		if err != nil {
			return &lintError{string(out)}
		}
		return nil
	}
	if err := lint(file); err != nil {
		t.Fatalf("the JUnit file does not match its schema: %v", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`<testsuite name="tests/plan.wdctest.hcl" tests="4" failures="1" errors="2"`, `<testcase name="fails" classname="tests/plan.wdctest.hcl"`,
		`<failure message="1 of 1 assertion failed" type="assertion"><![CDATA[Assertion failed at `, `tests/plan.wdctest.hcl:18: two shards, and there are 3`,
		`  plan.changes is 3`, `<error message="Invalid value for variable &#34;shards&#34;" type="error">`, `is not a number`} {
		if !strings.Contains(s, want) {
			t.Errorf("the JUnit file lacks %q:\n%s", want, s)
		}
	}
	for _, m := range []struct{ name, from, to string }{
		{"a testcase without a name", `<testcase name="fails"`, `<testcase`},
		{"a count that is not a number", `tests="4"`, `tests="four"`},
		{"an unknown element", `</testsuite>`, `<teardown/></testsuite>`},
	} {
		bad := filepath.Join(t.TempDir(), "bad.xml")
		if err := os.WriteFile(bad, []byte(strings.Replace(s, m.from, m.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if lint(bad) == nil {
			t.Errorf("the JUnit schema accepts a file with %s", m.name)
		}
	}
}

type lintError struct{ out string }

func (e *lintError) Error() string { return e.out }

// cmdJSONSchema checks a JSON file against a schema of docs/schema (every
// schema there known by its $id, as loadSchema knows them):
//
//	json-schema SCHEMA FILE
func cmdJSONSchema(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: json-schema SCHEMA FILE")
	}
	dir := filepath.Join(ts.Getenv("REPO"), "docs", "schema")
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	ts.Check(err)
	for _, f := range files {
		r, err := os.Open(f)
		ts.Check(err)
		doc, err := jsonschema.UnmarshalJSON(r)
		r.Close()
		ts.Check(err)
		ts.Check(c.AddResource(schemaIDBase+filepath.Base(f), doc))
	}
	sch, err := c.Compile(schemaIDBase + args[0])
	ts.Check(err)
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	err = checkDoc(sch, data)
	switch {
	case err != nil && !neg:
		ts.Fatalf("%s does not match %s: %v", args[1], args[0], err)
	case err == nil && neg:
		ts.Fatalf("%s matches %s", args[1], args[0])
	}
}

// TestTestCmdWithoutTestFiles: a configuration without test files is an
// error that says where wdc test looked.
func TestTestCmdWithoutTestFiles(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, testCmdConfig)
	_, stderr, code := runWDC(t, "--chdir", dir, "test")
	if want := "wdc: error: no test files (*.wdctest.hcl) in " + dir + " or its tests folder\n"; code != 1 || stderr != want {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}
