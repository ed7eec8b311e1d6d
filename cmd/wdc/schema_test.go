package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/demo"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"

	"github.com/wdc-dev/wdc/protocol"
)

// The JSON documents of the CLI are described by the schemas in
// docs/schema; these tests validate real output of the commands against
// them (docs/json.md).

// loadSchema compiles one schema of docs/schema, asserting formats
// (date-time) too.
func loadSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "docs", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	// Every schema is known by its $id, as a validator given them all
	// would know them: apply-event's $ref to plan.schema.json resolves
	// against its $id, never over the network.
	dir := filepath.Dir(path)
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("schemas in %s: %v", dir, err)
	}
	for _, f := range files {
		doc, id := readSchema(t, f)
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("adding %s: %v", f, err)
		}
	}
	_, id := readSchema(t, path)
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return sch
}

// schemaIDBase is where every schema's $id points: the schema files as
// the repository publishes them.
const schemaIDBase = "https://github.com/wdc-dev/wdc/raw/main/docs/schema/"

// readSchema reads a schema file and returns it and its $id, which must be
// schemaIDBase followed by the file's name.
func readSchema(t *testing.T, path string) (any, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	m, _ := doc.(map[string]any)
	id, _ := m["$id"].(string)
	if want := schemaIDBase + filepath.Base(path); id != want {
		t.Fatalf("%s: $id is %q, want %q", path, id, want)
	}
	return doc, id
}

// validateDoc checks that data is one JSON value valid against sch.
func validateDoc(t *testing.T, sch *jsonschema.Schema, what string, data []byte) {
	t.Helper()
	if err := checkDoc(sch, data); err != nil {
		t.Errorf("%s does not match its schema: %v\ndocument:\n%s", what, err, data)
	}
}

func checkDoc(sch *jsonschema.Schema, data []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// schemaConfig has two pools, a counted task, dependencies, placement, env
// and a sensitive variable.
const schemaConfig = `
variable "greeting" {
  type    = string
  default = "hello"
}

variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-value"
}

pool "cpu" {
  provider = "local"
  max      = 2
  labels   = { arch = "amd64" }
}

pool "big" {
  provider = "local"
  max      = 1
  capacity = 2
  labels   = { arch = "amd64", mem = "high" }
}

task "fetch" {
  command = ["echo", var.greeting]
}

task "shard" {
  count      = 2
  depends_on = [task.fetch]
  command    = ["sh", "-c", "echo ${count.index} ${var.token}"]
  env        = { SHARD = "yes" }
  placement  = { arch = "amd64" }
}

task "merge" {
  depends_on = [task.shard]
  command    = ["true"]
  placement  = { mem = "high" }
}
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// seedSchemaState records, in dir's default state file, task.fetch and
// task.shard[0] as succeeded, task.shard[1] as failed and task.gone (not
// in the configuration) as running under a lease of a registered worker,
// and takes the apply lock, so every list of the state document has an
// entry.
func seedSchemaState(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := state.Open(ctx, filepath.Join(dir, defaultStatePath))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	key, err := st.HashKey(ctx)
	must(err)
	defs := plan.Definitions(cfg, key)
	for _, task := range cfg.Tasks {
		d := defs[task.Address()]
		switch task.Address() {
		case "task.fetch", "task.shard[0]", "task.shard[1]":
		default:
			continue
		}
		must(st.UpsertTask(ctx, state.TaskDef{Address: task.Address(), Name: task.Name, Index: task.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, now))
	}
	must(seedSucceeded(ctx, st, now, "task.fetch", "task.shard[0]"))
	must(seedFailed(ctx, st, now, "exit status 1", "task.shard[1]"))
	must(st.UpsertPool(ctx, state.Pool{Name: "cpu", Provider: "local", Max: 2, Capacity: 1, Labels: map[string]string{"arch": "amd64"}}, now))
	w, err := st.RegisterWorker(ctx, state.Worker{Pool: "cpu", Labels: map[string]string{"arch": "amd64"}, Capacity: 1,
		Host: "lab1", PID: 4242, Version: "test", HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
	must(err)
	must(st.UpsertTask(ctx, state.TaskDef{Address: "task.gone", Name: "gone", Index: -1, DefHash: strings.Repeat("ab", 32),
		Spec: []byte(`{}`), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, now))
	_, err = st.GrantLease(ctx, state.GrantRequest{Task: "task.gone", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, now)
	must(err)
	_, _, err = st.AcquireLock(ctx, state.LockRequest{Holder: "tester@lab1", Host: "lab1", PID: 4242, TTL: time.Minute}, now)
	must(err)
}

// wdcOut runs wdc in-process and fails the test unless it exits 0.
func wdcOut(t *testing.T, args ...string) []byte {
	t.Helper()
	stdout, stderr, code := runWDC(t, args...)
	if code != 0 {
		t.Fatalf("wdc %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	return []byte(stdout)
}

func TestSchemaPlanAndShow(t *testing.T) {
	planSchema := loadSchema(t, "plan.schema.json")
	stateSchema := loadSchema(t, "state.schema.json")

	dir := writeConfig(t, schemaConfig)

	// No state yet: every task runs.
	fresh := wdcOut(t, "--chdir", dir, "plan", "--json")
	validateDoc(t, planSchema, "plan --json (no state)", fresh)
	validateDoc(t, stateSchema, "show --json (no state)", wdcOut(t, "--chdir", dir, "show", "--json"))
	if _, err := os.Stat(filepath.Join(dir, defaultStatePath)); err == nil {
		t.Fatal("plan or show created the state")
	}

	// A kubernetes pool's plan carries what each launch creates (1.3).
	k8s := writeConfig(t, "pool \"pods\" {\n  provider = \"kubernetes\"\n  kubernetes {\n    image = \"wdc:1\"\n  }\n}\n\ntask \"t\" {\n  command = [\"true\"]\n}\n")
	preview := wdcOut(t, "--chdir", k8s, "plan", "--json", "--no-cluster-check")
	validateDoc(t, planSchema, "plan --json (kubernetes pool)", preview)
	if !bytes.Contains(preview, []byte(`"launch_preview": [`)) {
		t.Errorf("the plan of a kubernetes pool has no launch_preview:\n%s", preview)
	}

	seedSchemaState(t, dir)
	validateDoc(t, planSchema, "plan --json (seeded)", wdcOut(t, "--chdir", dir, "plan", "--json"))
	validateDoc(t, stateSchema, "show --json (seeded)", wdcOut(t, "--chdir", dir, "show", "--json"))

	// --replace fetch: fetch and shard[0] are replaced, shard[1] retried,
	// merge run and gone cancelled; every action appears.
	all := wdcOut(t, "--chdir", dir, "plan", "--json", "--replace", "fetch", "--out", "saved.json")
	validateDoc(t, planSchema, "plan --json --replace", all)
	var doc jsonplan.Plan
	if err := json.Unmarshal(all, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range doc.Changes {
		got[c.Address] = c.Action
	}
	want := map[string]string{"task.fetch": "replace", "task.shard[0]": "replace", "task.shard[1]": "retry", "task.merge": "run", "task.gone": "cancel"}
	for addr, action := range want {
		if got[addr] != action {
			t.Errorf("%s: action %q, want %q (changes: %v)", addr, got[addr], action, got)
		}
	}
	if doc.Variables["token"].Sensitive != true || string(doc.Variables["token"].Value) != `"(sensitive)"` {
		t.Errorf("variable token = %+v, want a sensitive, redacted value", doc.Variables["token"])
	}

	saved, err := os.ReadFile(filepath.Join(dir, "saved.json"))
	if err != nil {
		t.Fatal(err)
	}
	validateDoc(t, planSchema, "saved plan file", saved)
	if bytes.Contains(saved, []byte("s3cr3t")) {
		t.Error("the saved plan holds the sensitive value")
	}
	shown := wdcOut(t, "--chdir", dir, "show", "saved.json", "--json")
	validateDoc(t, planSchema, "show FILE --json", shown)
	if !bytes.Equal(bytes.TrimSpace(shown), bytes.TrimSpace(saved)) {
		t.Errorf("show FILE --json differs from the saved file:\n%s\nsaved:\n%s", shown, saved)
	}

	// A plan with no changes.
	noop := writeConfig(t, "pool \"p\" {\n  provider = \"local\"\n}\n")
	validateDoc(t, planSchema, "plan --json (no tasks)", wdcOut(t, "--chdir", noop, "plan", "--json"))
}

// TestSchemaRejectsBrokenDocuments proves the schemas catch what they
// should: each mutation of a valid plan document must be refused.
func TestSchemaRejectsBrokenDocuments(t *testing.T) {
	planSchema := loadSchema(t, "plan.schema.json")
	dir := writeConfig(t, schemaConfig)
	seedSchemaState(t, dir)
	valid := wdcOut(t, "--chdir", dir, "plan", "--json", "--replace", "fetch")
	if err := checkDoc(planSchema, valid); err != nil {
		t.Fatalf("the valid document is refused: %v", err)
	}
	// A plan read from a backend names it (1.8).
	var withBackend map[string]any
	if err := json.Unmarshal(valid, &withBackend); err != nil {
		t.Fatal(err)
	}
	withBackend["state"].(map[string]any)["backend"] = map[string]any{"name": "s3://ci-state/wdc/state.db", "etag": "0cc175b9c0f1b6a831c399e269772661"}
	if data, _ := json.Marshal(withBackend); checkDoc(planSchema, data) != nil {
		t.Errorf("a plan with a backend is refused: %v", checkDoc(planSchema, data))
	}
	mutations := []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"backend without an etag", func(d map[string]any) {
			d["state"].(map[string]any)["backend"] = map[string]any{"name": "s3://ci-state/wdc/state.db"}
		}},
		{"unknown action", func(d map[string]any) { change(d, 0)["action"] = "explode" }},
		{"symbol does not match the action", func(d map[string]any) { change(d, 0)["symbol"] = "~" }},
		{"missing summary", func(d map[string]any) { delete(d, "summary") }},
		{"unknown top-level field", func(d map[string]any) { d["extra"] = true }},
		{"unknown field in a change", func(d map[string]any) { change(d, 0)["note"] = "x" }},
		{"status outside the enum", func(d map[string]any) { change(d, 0)["before"].(map[string]any)["status"] = "done" }},
		{"serial is a string", func(d map[string]any) { d["state"].(map[string]any)["serial"] = "7" }},
		{"created_at is not a date-time", func(d map[string]any) { d["created_at"] = "yesterday" }},
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
		{"cancel with a definition", func(d map[string]any) {
			changes := d["changes"].([]any)
			last := changes[len(changes)-1].(map[string]any)
			last["after"] = change(d, 0)["after"]
		}},
		{"sensitive value shown", func(d map[string]any) {
			d["variables"].(map[string]any)["token"].(map[string]any)["value"] = "s3cr3t-value"
		}},
		{"command is not a list", func(d map[string]any) { change(d, 0)["after"].(map[string]any)["command"] = "true" }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(valid, &doc); err != nil {
				t.Fatal(err)
			}
			m.mutate(doc)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDoc(planSchema, b); err == nil {
				t.Errorf("the schema accepts a document with %s", m.name)
			}
		})
	}

	// The apply line schema refuses an unknown event kind and a line
	// without a type.
	lineSchema := loadSchema(t, "apply-event.schema.json")
	for _, line := range []string{
		`{"type":"event","kind":"exploded","at":"2026-11-29T12:00:00Z"}`,
		`{"kind":"leased","at":"2026-11-29T12:00:00Z"}`,
		`{"type":"event","kind":"leased","at":"2026-11-29T12:00:00Z","task":"task.a"}`,
		`{"type":"summary","ok":true}`,
	} {
		if err := checkDoc(lineSchema, []byte(line)); err == nil {
			t.Errorf("apply-event schema accepts %s", line)
		}
	}
	if err := checkDoc(lineSchema, []byte(`{"type":"event","kind":"draining","at":"2026-11-29T12:00:00.123456789Z","message":"draining workers"}`)); err != nil {
		t.Errorf("apply-event schema refuses a valid event line: %v", err)
	}
}

// change returns the i-th change of a decoded plan document.
func change(doc map[string]any, i int) map[string]any {
	return doc["changes"].([]any)[i].(map[string]any)
}

// applyConfig: a task that fails its first attempt (a retry), one that
// depends on it, and one more on a second pool.
const applyConfig = `
pool "p" {
  provider = "local"
  max      = 1

  heartbeat {
    interval = "500ms"
    ttl      = "5s"
  }
}

pool "q" {
  provider = "local"
  labels   = { role = "q" }
}

task "flaky" {
  command = ["sh", "-c", "if [ \"$WDC_ATTEMPT\" = 1 ]; then echo first attempt fails >&2; exit 1; fi"]

  retry {
    max_attempts = 2
    backoff      = "100ms"
  }
}

task "after" {
  depends_on = [task.flaky]
  command    = ["true"]
}

task "other" {
  command   = ["true"]
  placement = { role = "q" }
}
`

// TestSchemaApplyNDJSON validates every line of a real `wdc apply --json
// --auto-approve`. apply launches workers with os.Executable, which in a
// unit test is the test binary, so this builds wdc and runs it.
func TestSchemaApplyNDJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wdc and runs a real apply")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build wdc with")
	}
	lineSchema := loadSchema(t, "apply-event.schema.json")
	bin := filepath.Join(t.TempDir(), "wdc")
	build := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	dir := writeConfig(t, applyConfig)
	apply := func() ([]byte, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--chdir", dir, "apply", "--json", "--auto-approve")
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("apply: %v\nstderr:\n%s", err, stderr.String())
		}
		if stderr.Len() > 0 {
			t.Logf("apply stderr:\n%s", stderr.String())
		}
		return stdout.Bytes(), code
	}
	checkLines := func(out []byte) (types []string, kinds map[string]int) {
		t.Helper()
		kinds = map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := sc.Bytes()
			validateDoc(t, lineSchema, "apply --json line "+strconv.Itoa(n), line)
			var head struct{ Type, Kind string }
			if err := json.Unmarshal(line, &head); err != nil {
				t.Fatalf("line %d is not JSON: %v\n%s", n, err, line)
			}
			types = append(types, head.Type)
			if head.Type == "event" {
				kinds[head.Kind]++
			}
		}
		return types, kinds
	}

	out, code := apply()
	if code != 0 {
		t.Fatalf("apply exit %d, stdout:\n%s", code, out)
	}
	types, kinds := checkLines(out)
	if len(types) < 3 || types[0] != "plan" || types[len(types)-1] != "summary" {
		t.Errorf("line types %v: want plan, events…, summary", types)
	}
	for _, k := range []string{"launched", "registered", "leased", "succeeded", "retried", "queued"} {
		if kinds[k] == 0 {
			t.Errorf("no %q event; kinds seen: %v\nstdout:\n%s", k, kinds, out)
		}
	}

	// Again: nothing to do, a plan line and a summary line.
	out, code = apply()
	if code != 0 {
		t.Fatalf("second apply exit %d, stdout:\n%s", code, out)
	}
	types, _ = checkLines(out)
	if strings.Join(types, ",") != "plan,summary" {
		t.Errorf("second apply line types %v, want plan, summary", types)
	}
}

// TestSchemaDemoWorkerLeases validates `wdc demo worker-leases --json`
// against its schema, and a document of a story whose checks failed, and
// proves the schema refuses documents that contradict themselves.
func TestSchemaDemoWorkerLeases(t *testing.T) {
	sch := loadSchema(t, "demo-worker-leases.schema.json")
	out := wdcOut(t, "demo", "worker-leases", "--json")
	validateDoc(t, sch, "demo worker-leases --json", out)
	var doc views.DemoDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.OK || doc.FormatVersion != "1.0" || len(doc.Steps) != 9 || doc.Summary.Failed != 0 {
		t.Fatalf("ok %v, format_version %q, %d steps, %d failed: want a successful 1.0 story of 9 steps", doc.OK, doc.FormatVersion, len(doc.Steps), doc.Summary.Failed)
	}

	// A story with a check that did not hold, and one that stopped.
	report, err := demo.WorkerLeases(context.Background(), demo.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	report.Steps[4].Checks[0].OK = false
	failed, err := json.Marshal(views.NewDemoDoc(report))
	if err != nil {
		t.Fatal(err)
	}
	validateDoc(t, sch, "a document with a failed check", failed)
	report.Steps = report.Steps[:5]
	report.Steps[4].State = nil
	report.Stopped = "step 5 (sweep) could not go on: the sweep: connection refused"
	stopped, err := json.Marshal(views.NewDemoDoc(report))
	if err != nil {
		t.Fatal(err)
	}
	validateDoc(t, sch, "a document of a story that stopped", stopped)

	mutations := []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"ok with a failed check", func(d map[string]any) { d["summary"].(map[string]any)["failed"] = 1 }},
		{"ok but stopped", func(d map[string]any) { d["summary"].(map[string]any)["stopped"] = "why" }},
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
		{"unknown step id", func(d map[string]any) { demoStep(d, 0)["id"] = "explode" }},
		{"unknown worker name", func(d map[string]any) { d["workers"].([]any)[0].(map[string]any)["name"] = "C" }},
		{"rejected result without a reason", func(d map[string]any) {
			res := demoStep(d, 6)["state"].(map[string]any)["results"].([]any)[0].(map[string]any)
			delete(res, "reason")
		}},
		{"ended lease without ended_at", func(d map[string]any) {
			l := demoStep(d, 4)["state"].(map[string]any)["leases"].([]any)[0].(map[string]any)
			delete(l, "ended_at")
		}},
		{"unknown field in a check", func(d map[string]any) { demoStep(d, 0)["checks"].([]any)[0].(map[string]any)["note"] = "x" }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(out, &d); err != nil {
				t.Fatal(err)
			}
			m.mutate(d)
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDoc(sch, b); err == nil {
				t.Errorf("the schema accepts a demo document with %s", m.name)
			}
		})
	}
}

// demoStep returns the i-th step of a decoded demo document.
func demoStep(doc map[string]any, i int) map[string]any {
	return doc["steps"].([]any)[i].(map[string]any)
}

// TestSchemaDoctor validates `wdc doctor --json` of a state made for each
// kind of finding (doctorStates) against doctor.schema.json, and checks
// that the schema refuses what it should.
func TestSchemaDoctor(t *testing.T) {
	doctorSchema := loadSchema(t, "doctor.schema.json")
	var valid []byte
	for name, makeState := range doctorStates {
		dir := writeConfig(t, doctorConfig)
		makeState(t, dir)
		out, _, _ := runWDC(t, "--chdir", dir, "doctor", "--json")
		validateDoc(t, doctorSchema, "doctor --json ("+name+")", []byte(out))
		if name == "dead apply with queued work" {
			valid = []byte(out)
		}
	}
	if err := checkDoc(doctorSchema, valid); err != nil {
		t.Fatalf("the valid document is refused: %v", err)
	}
	for _, m := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"unknown severity", func(d map[string]any) { d["findings"].([]any)[0].(map[string]any)["severity"] = "fatal" }},
		{"unknown check status", func(d map[string]any) { d["checks"].([]any)[0].(map[string]any)["status"] = "ok" }},
		{"a skipped check without a note", func(d map[string]any) {
			c := d["checks"].([]any)[0].(map[string]any)
			c["status"] = "skipped"
			delete(c, "note")
		}},
		{"an exit code doctor never uses", func(d map[string]any) { d["summary"].(map[string]any)["exit_code"] = 2 }},
		{"details null", func(d map[string]any) { d["findings"].([]any)[0].(map[string]any)["details"] = nil }},
		{"unknown top-level field", func(d map[string]any) { d["extra"] = true }},
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
	} {
		var doc map[string]any
		if err := json.Unmarshal(valid, &doc); err != nil {
			t.Fatal(err)
		}
		m.mutate(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDoc(doctorSchema, b); err == nil {
			t.Errorf("the doctor schema accepts a document with %s", m.name)
		}
	}
}

// TestSchemaStatus validates `wdc status --json` without a state, after an
// apply, and a document of a running apply as the command builds it,
// against status.schema.json; and checks that the schema refuses what it
// should.
func TestSchemaStatus(t *testing.T) {
	t.Parallel()
	sch := loadSchema(t, "status.schema.json")
	dir := writeConfig(t, schemaConfig)
	validateDoc(t, sch, "status --json (no state)", wdcOut(t, "--chdir", dir, "status", "--json"))
	seedSchemaState(t, dir) // holds the lock, with no coordinator serving
	seeded := wdcOut(t, "--chdir", dir, "status", "--json")
	validateDoc(t, sch, "status --json (seeded)", seeded)
	if !strings.Contains(string(seeded), `"answered": false`) {
		t.Errorf("status of a lock without a coordinator does not say it did not answer: %s", seeded)
	}

	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	one, zero := 1, 0
	running := statusDoc{FormatVersion: statusFormatVersion, Path: "/x/.wdc/state.db", Exists: true, At: at,
		Apply: &statusApply{ID: "ab12", Holder: "me@h", Host: "h", PID: 7, Since: at.Add(-time.Minute), ExpiresAt: at.Add(time.Minute),
			CoordinatorURL: "http://127.0.0.1:4000", HolderState: "live", Answered: true},
		Pools: []statusPool{{Name: "p", Provider: "local", Max: 4, Workers: map[string]int{"active": 2}, Busy: 1, Idle: 1, Queued: &one, Pending: &zero,
			Supervisor: &protocol.SupervisorDecision{Action: "hold", Reason: "1 queued task fit the free slots", At: at}}},
		Tasks:        map[string]int{"queued": 1, "running": 1},
		OldestQueued: &statusOldest{Task: "task.b", Since: at.Add(-3 * time.Second), AgeSeconds: 3}}
	valid, err := json.Marshal(running)
	if err != nil {
		t.Fatal(err)
	}
	validateDoc(t, sch, "status of a running apply", valid)
	for _, m := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"an unknown supervisor action", func(d map[string]any) {
			d["pools"].([]any)[0].(map[string]any)["supervisor"].(map[string]any)["action"] = "scale"
		}},
		{"a worker status gone", func(d map[string]any) { d["pools"].([]any)[0].(map[string]any)["workers"].(map[string]any)["gone"] = 1 }},
		{"an unknown task status", func(d map[string]any) { d["tasks"].(map[string]any)["waiting"] = 1 }},
		{"an unknown holder state", func(d map[string]any) { d["apply"].(map[string]any)["holder_state"] = "asleep" }},
		{"no format_version", func(d map[string]any) { delete(d, "format_version") }},
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
	} {
		var doc map[string]any
		if err := json.Unmarshal(valid, &doc); err != nil {
			t.Fatal(err)
		}
		m.mutate(doc)
		b, _ := json.Marshal(doc)
		if err := checkDoc(sch, b); err == nil {
			t.Errorf("the status schema accepts a document with %s", m.name)
		}
	}
}

// TestSchemaProviders validates `wdc providers --json` with and without a
// configuration, and with a provider that fails its contract, against
// providers.schema.json, and checks that the schema refuses what it
// should.
func TestSchemaProviders(t *testing.T) {
	sch := loadSchema(t, "providers.schema.json")
	dir := writeConfig(t, providersConfig)
	valid := wdcOut(t, "--chdir", dir, "providers", "--json")
	validateDoc(t, sch, "providers --json", valid)
	validateDoc(t, sch, "providers --json without a configuration", wdcOut(t, "--chdir", t.TempDir(), "providers", "--json"))
	broken, _, _ := listProviders(t, dir, true, append(providers.List(), brokenEntry))
	validateDoc(t, sch, "providers --json with a provider that fails its contract", []byte(broken))

	var doc providersDoc
	if err := json.Unmarshal(valid, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.FormatVersion != "1.0" || !doc.Configuration.Loaded || doc.Summary != (providersSummaryJSON{Available: 4}) {
		t.Errorf("format_version %q, configuration %+v, summary %+v: want 1.0, loaded, 4 available and none planned", doc.FormatVersion, doc.Configuration, doc.Summary)
	}

	provider := func(d map[string]any, name string) map[string]any {
		for _, p := range d["providers"].([]any) {
			if p := p.(map[string]any); p["name"] == name {
				return p
			}
		}
		t.Fatalf("no provider %q", name)
		return nil
	}
	// planned makes a provider of the document look planned, as the
	// listing shows one (no source, no capabilities): every built-in one
	// is available now.
	planned := func(d map[string]any, name string) map[string]any {
		p := provider(d, name)
		p["status"], p["source"], p["capabilities"] = "planned", nil, nil
		return p
	}
	for _, m := range []struct {
		name   string
		mutate func(d map[string]any)
	}{
		{"another major format version", func(d map[string]any) { d["format_version"] = "2.0" }},
		{"unknown top-level field", func(d map[string]any) { d["extra"] = true }},
		{"unknown status", func(d map[string]any) { provider(d, "local")["status"] = "beta" }},
		{"invalid without an error", func(d map[string]any) { provider(d, "local")["status"] = "invalid" }},
		{"an error while available", func(d map[string]any) {
			provider(d, "local")["error"] = map[string]any{"rule": "render", "detail": "x", "message": "y"}
		}},
		{"a planned provider with capabilities", func(d map[string]any) {
			planned(d, "ray")["capabilities"] = provider(d, "local")["capabilities"]
		}},
		{"a planned provider with pools", func(d map[string]any) { planned(d, "ray")["pools"] = []any{"p"} }},
		{"an available provider without a source", func(d map[string]any) { provider(d, "local")["source"] = nil }},
		{"cluster writes enabled without the capability", func(d map[string]any) { provider(d, "local")["cluster_writes_enabled"] = true }},
		{"pools null", func(d map[string]any) { provider(d, "local")["pools"] = nil }},
		{"a pseudo-provider other than external", func(d map[string]any) { provider(d, "local")["pseudo"] = true }},
		{"unknown capability", func(d map[string]any) { provider(d, "local")["capabilities"].(map[string]any)["teleport"] = true }},
		{"not loaded without a note", func(d map[string]any) { d["configuration"].(map[string]any)["loaded"] = false }},
	} {
		var d map[string]any
		if err := json.Unmarshal(valid, &d); err != nil {
			t.Fatal(err)
		}
		m.mutate(d)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDoc(sch, b); err == nil {
			t.Errorf("the providers schema accepts a document with %s", m.name)
		}
	}
}

// chainSchemaConfig has a task whose recommendations an edge turns into
// proposals.
const chainSchemaConfig = `pool "p" {
  provider = "local"
}

task "doctor" {
  command = ["true"]
}

task "rerun" {
  proposed_only = true
  command       = ["echo", proposal.input.run]
}

edge "flake_rerun" {
  from    = task.doctor
  type    = "flake"
  propose = task.rerun
  input   = object({ run = string })
}
`

// TestSchemaPlanWithProposals: a plan that runs an approved proposal and
// lists a pending one fits the plan schema (1.5).
func TestSchemaPlanWithProposals(t *testing.T) {
	planSchema := loadSchema(t, "plan.schema.json")
	stateSchema := loadSchema(t, "state.schema.json")
	dir := writeConfig(t, chainSchemaConfig)
	ctx := context.Background()
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := state.Open(ctx, filepath.Join(dir, defaultStatePath))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	key, err := st.HashKey(ctx)
	must(err)
	d := plan.Definitions(cfg, key)["task.doctor"]
	must(st.UpsertPool(ctx, state.Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, now))
	must(st.UpsertTask(ctx, state.TaskDef{Address: "task.doctor", Name: "doctor", Index: -1, DefHash: d.Hash,
		Spec: d.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, now))
	w, err := st.RegisterWorker(ctx, state.Worker{Pool: "p", Capacity: 1, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
	must(err)
	l, err := st.GrantLease(ctx, state.GrantRequest{Task: "task.doctor", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, now)
	must(err)
	zero := 0
	_, err = st.AcceptResult(ctx, state.ResultInput{Key: "k", Token: l.Token, WorkerID: w.ID, ExitCode: &zero, Recommendations: []state.RecommendationInput{
		{Type: "flake", Input: []byte(`{"run":"1"}`)}, {Type: "flake", Input: []byte(`{"run":"2"}`)}}}, nil, now)
	must(err)
	js, err := coordinator.JudgeRecommendations(ctx, st, cfg, time.Now)
	must(err)
	if len(js) != 2 || js[0].Proposal == nil || js[1].Proposal == nil {
		t.Fatalf("judgements %+v; want two proposals", js)
	}
	_, err = st.DecideProposal(ctx, js[0].Proposal.ID, true, "alice", "", now)
	must(err)
	_, serial, err := st.Info(ctx)
	must(err)
	must(st.Close())

	plan := wdcOut(t, "--chdir", dir, "plan", "--json")
	// Invariant 8: the plan read the proposals and wrote nothing.
	ro, err := state.OpenReadOnly(ctx, filepath.Join(dir, defaultStatePath))
	must(err)
	_, after, err := ro.Info(ctx)
	must(err)
	ro.Close()
	if after != serial {
		t.Errorf("the plan moved the state's serial from %d to %d", serial, after)
	}
	validateDoc(t, planSchema, "plan --json (proposals)", plan)
	var doc jsonplan.Plan
	must(json.Unmarshal(plan, &doc))
	if len(doc.Changes) != 1 || doc.Changes[0].Address != "proposal.1" || doc.Changes[0].Proposal == nil || doc.Changes[0].After == nil ||
		len(doc.WaitingProposals) != 1 || doc.WaitingProposals[0].Address != "proposal.2" {
		t.Errorf("plan changes %+v, waiting %+v; want proposal.1 to run and proposal.2 waiting", doc.Changes, doc.WaitingProposals)
	}
	validateDoc(t, stateSchema, "show --json (proposals)", wdcOut(t, "--chdir", dir, "show", "--json"))
}

// TestBackendLockSchema: the lock object the backend writes, held and
// released, matches its schema.
func TestBackendLockSchema(t *testing.T) {
	sch := loadSchema(t, "backend-lock.schema.json")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	held := backend.Lock{ID: "0123456789abcdef0123456789abcdef", Operation: "apply", Holder: "ci@runner-7", Host: "runner-7", PID: 4242,
		StartedAt: t0, RenewedAt: t0.Add(10 * time.Second), ExpiresAt: t0.Add(70 * time.Second)}
	released := held
	released.Released, released.ReleasedAt, released.ExpiresAt, released.ForcedBy = true, t0.Add(20*time.Second), t0.Add(20*time.Second), "op@laptop"
	for name, l := range map[string]backend.Lock{"held": held, "released": released} {
		validateDoc(t, sch, name+" lock", l.Encode())
	}
}
