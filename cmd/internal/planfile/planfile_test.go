package planfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	_ "github.com/wdc-dev/wdc/providers/local" // the configuration's pool is local
	"github.com/wdc-dev/wdc/state"
)

const config = `
variable "n" {
  default = 1
}

pool "p" {
  provider = "local"
}

task "t" {
  command = ["echo", "run ${var.n}"]
}
`

// load writes config into a fresh directory and loads it with vars.
func load(t *testing.T, dir string, vars ...string) *wdchcl.Config {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: vars, Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

// newDoc plans cfg against an empty state and returns its document.
func newDoc(t *testing.T, cfg *wdchcl.Config) *jsonplan.Plan {
	t.Helper()
	p, diags := plan.New(cfg, state.EmptySnapshot(), time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	doc, err := jsonplan.New(cfg, p, nil, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The file is the plan document, indented, with a final newline, mode
// 0600; reading it gives the document back.
func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	doc := newDoc(t, load(t, dir))
	path := filepath.Join(dir, "tfplan")
	if err := Write(path, doc); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want)+"\n" {
		t.Errorf("the file is not the indented document:\n%s", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, back); diff != "" {
		t.Errorf("read back (-wrote +read):\n%s", diff)
	}
}

// TestWriteWhere: a plan goes into folders that do not exist yet, over an
// earlier plan, and never over a directory or a FIFO (which stay).
func TestWriteWhere(t *testing.T) {
	dir := t.TempDir()
	doc := newDoc(t, load(t, dir))
	if err := Write(filepath.Join(dir, "plans", "next", "tfplan"), doc); err != nil {
		t.Errorf("into folders not made yet: %v", err)
	}
	again := filepath.Join(dir, "plans", "next", "tfplan")
	if err := Write(again, doc); err != nil {
		t.Errorf("over an earlier plan: %v", err)
	}
	folder := filepath.Join(dir, "a-folder")
	fifo := filepath.Join(dir, "a-fifo")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{folder: "a directory", fifo: "a FIFO"} {
		err := Write(path, doc)
		if err == nil || !strings.Contains(err.Error(), kind) || !strings.HasPrefix(err.Error(), "writing plan file: ") {
			t.Errorf("Write over %s: %v; want it refused, naming %s", kind, err, kind)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s was replaced: %v", kind, err)
		}
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, content, want string }{
		{"not json", "plan", "is not a wdc plan (invalid character"},
		{"no format version", `{"changes": []}`, "is not a wdc plan (no format_version): write one with wdc plan --out FILE"},
		{"another major version", `{"format_version": "2.0"}`, "has format version 2.0; this wdc reads " + jsonplan.FormatVersion},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "none")); err == nil || !strings.HasPrefix(err.Error(), "reading plan file: ") {
		t.Errorf("Read of a missing file: %v", err)
	}
	// What is not a regular file is refused at once, saying what it is.
	fifo, zero := filepath.Join(dir, "fifo"), filepath.Join(dir, "zero")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo: "plan file " + fifo + " is a FIFO (named pipe), not a regular file",
		zero: "plan file " + zero + " is a character device (a symbolic link to /dev/zero), not a regular file",
	} {
		errc := make(chan error, 1)
		go func() { _, err := Read(path); errc <- err }()
		select {
		case err := <-errc:
			if err == nil || err.Error() != want {
				t.Errorf("Read(%s): %v, want %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) did not return within 5 s", path)
		}
	}
}

// noKey is the hash key of a plan made with no state; keyOf a state's.
func noKey() ([]byte, error) { return nil, nil }

func keyOf(key []byte) func() ([]byte, error) { return func() ([]byte, error) { return key, nil } }

func TestCheckFresh(t *testing.T) {
	dir := t.TempDir()
	doc := newDoc(t, load(t, dir))
	if _, err := CheckFresh(doc, load(t, dir), "1.0.0", noKey); err != nil {
		t.Errorf("the same configuration and values: %v", err)
	}
	for _, tt := range []struct {
		name    string
		cfg     *wdchcl.Config
		version string
		want    string
	}{
		{"another wdc", load(t, dir), "1.0.1", "the plan was made by wdc 1.0.0 and this is wdc 1.0.1"},
		{"other variable values", load(t, dir, "n=2"), "1.0.0", "the variable values differ from those the plan was made with"},
	} {
		if _, err := CheckFresh(doc, tt.cfg, tt.version, noKey); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	edited := load(t, dir)
	for _, f := range edited.Files {
		f.Bytes = append(append([]byte{}, f.Bytes...), '\n')
	}
	if _, err := CheckFresh(doc, edited, "1.0.0", noKey); err == nil || !strings.Contains(err.Error(), "the configuration changed since the plan was made (the content of main.wdc.hcl changed)") {
		t.Errorf("an edited file: %v", err)
	}
}

// A saved plan holds no sensitive value, only its keyed hash under the
// state's key; apply reads the value again and refuses one that changed,
// naming the variable. Without the key the hash does not match.
func TestCheckFreshSensitive(t *testing.T) {
	dir := t.TempDir()
	src := "variable \"token\" {\n  sensitive = true\n}\npool \"p\" {\n  provider = \"local\"\n}\n" +
		"task \"t\" {\n  command = [\"true\"]\n  env     = { TOKEN = var.token }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	loadWith := func(token string) *wdchcl.Config {
		cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: []string{"token=" + token}, Providers: providers.Schemas()})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	snap := state.EmptySnapshot()
	snap.Lineage, snap.HashKey = "l1", []byte("0123456789abcdef0123456789abcdef")
	p, diags := plan.New(loadWith("hunter2"), snap, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	doc, err := jsonplan.New(loadWith("hunter2"), p, nil, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	if strings.Contains(string(b), "hunter2") {
		t.Fatalf("the plan document holds the sensitive value:\n%s", b)
	}
	if _, err := CheckFresh(doc, loadWith("hunter2"), "1.0.0", keyOf(snap.HashKey)); err != nil {
		t.Errorf("the same value: %v", err)
	}
	if _, err := Rebuild(doc, loadWith("hunter2"), snap.HashKey); err != nil {
		t.Errorf("rebuilding with the same value: %v", err)
	}
	want := "the value of the sensitive variable var.token differs from the one the plan was made with"
	if _, err := CheckFresh(doc, loadWith("hunter3"), "1.0.0", keyOf(snap.HashKey)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another value: %v, want an error containing %q", err, want)
	}
	if _, err := Rebuild(doc, loadWith("hunter3"), snap.HashKey); err == nil || !strings.Contains(err.Error(), "no longer has the definition the plan recorded") {
		t.Errorf("rebuilding with another value: %v", err)
	}
	if _, err := CheckFresh(doc, loadWith("hunter2"), "1.0.0", keyOf([]byte("another key"))); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another key: %v, want an error containing %q", err, want)
	}
}

func TestRebuild(t *testing.T) {
	dir := t.TempDir()
	cfg := load(t, dir)
	doc := newDoc(t, cfg)
	p, err := Rebuild(doc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := plan.Definitions(cfg, nil)["task.t"]
	if len(p.Tasks) != 1 || p.Tasks[0].Address != "task.t" || p.Tasks[0].Action != plan.ActionRun || p.Tasks[0].NewHash != def.Hash ||
		len(p.Pools) != 1 || p.Pools[0].Name != "p" || p.Pools[0].Workers != doc.Pools[0].Workers {
		t.Errorf("rebuilt %+v", p)
	}

	changed := newDoc(t, cfg)
	changed.Changes[0].After.DefHash = strings.Repeat("0", 64)
	if _, err := Rebuild(changed, cfg, nil); err == nil || err.Error() != "plan file: task.t no longer has the definition the plan recorded: save a new plan" {
		t.Errorf("a recorded hash the configuration does not give: %v", err)
	}
	changed.Changes[0].After.Inputs = []jsonplan.Input{{Path: "in.txt", SHA256: strings.Repeat("1", 64)}}
	if _, err := Rebuild(changed, cfg, nil); err == nil || !strings.Contains(err.Error(), "the inputs of task.t changed since the plan was made (in.txt is gone)") {
		t.Errorf("an input that is gone: %v", err)
	}
	unknown := newDoc(t, cfg)
	unknown.Changes[0].Action = "explode"
	if _, err := Rebuild(unknown, cfg, nil); err == nil || err.Error() != `plan file: task.t has an unknown action "explode"` {
		t.Errorf("an unknown action: %v", err)
	}
}

func TestConfigChange(t *testing.T) {
	for _, tt := range []struct {
		planned, now []string
		want         string
	}{
		{[]string{"main.wdc.hcl"}, []string{"main.wdc.hcl"}, "the content of main.wdc.hcl changed"},
		{[]string{"a.wdc.hcl"}, []string{"a.wdc.hcl", "b.wdc.hcl"}, "added: b.wdc.hcl"},
		{[]string{"a.wdc.hcl", "b.wdc.hcl"}, []string{"b.wdc.hcl"}, "removed: a.wdc.hcl"},
		{[]string{"a.wdc.hcl"}, []string{"c.wdc.hcl"}, "added: c.wdc.hcl; removed: a.wdc.hcl"},
	} {
		if got := configChange(tt.planned, tt.now); got != tt.want {
			t.Errorf("configChange(%q, %q) = %q, want %q", tt.planned, tt.now, got, tt.want)
		}
	}
}
