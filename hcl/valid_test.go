package hcl

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var cmpOpts = cmp.Options{
	cmpopts.IgnoreTypes(hcl.Range{}),
	cmpopts.IgnoreFields(Task{}, "DirSet"),
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b cty.Value) bool { return a.RawEquals(b) }),
	cmp.Comparer(func(a, b cty.Type) bool { return a.Equals(b) }),
}

func abs(t *testing.T, dir string) string {
	t.Helper()
	a, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// task returns an instance with every default set.
func task(dir, name string, index int, command ...string) *Task {
	return &Task{
		Name:       name,
		Index:      index,
		Command:    command,
		Env:        map[string]string{},
		Dir:        dir,
		Placement:  map[string]string{},
		Timeout:    time.Hour,
		LeaseGrace: 2 * time.Minute,
		Retry:      Retry{MaxAttempts: 1, MaxLost: 3, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
	}
}

func pool(name string) *Pool {
	return &Pool{
		Name:          name,
		Provider:      "local",
		Min:           0,
		Max:           1,
		Capacity:      1,
		Labels:        map[string]string{},
		DrainTimeout:  60 * time.Second,
		LaunchTimeout: time.Minute,
		Heartbeat:     Heartbeat{Interval: 2 * time.Second, TTL: 10 * time.Second},
	}
}

func with(t *Task, f func(*Task)) *Task { f(t); return t }

func mustLoad(t *testing.T, dir string, in Inputs) *Config {
	t.Helper()
	cfg, diags := Load(dir, withProviders(in))
	if diags.HasErrors() {
		var buf bytes.Buffer
		_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
		t.Fatalf("Load(%s): unexpected errors:\n%s", dir, buf.String())
	}
	return cfg
}

func TestValid(t *testing.T) {
	type want struct {
		settings Settings
		pools    []*Pool
		tasks    []*Task
		vars     map[string]cty.Value // checked names only
		locals   map[string]cty.Value // nil: not checked
	}
	cases := []struct {
		name string
		in   func(dir string) Inputs
		want func(dir string) want
	}{
		{
			name: "defaults",
			want: func(dir string) want {
				return want{
					pools: []*Pool{pool("p")},
					tasks: []*Task{task(dir, "t", -1, "true")},
				}
			},
		},
		{
			name: "design",
			want: func(dir string) want {
				p := pool("builders")
				p.Min, p.Max = 1, 4
				p.Labels = map[string]string{"node": "lab", "arch": "amd64", "can": "build"}
				var tasks []*Task
				var addrs []string
				for i := range 4 {
					tk := task(filepath.Join(dir, "src"), "test", i, "go", "test", "-run", "Shard"+string(rune('0'+i)), "./...")
					tk.Placement = map[string]string{"can": "build"}
					tk.Timeout = 10 * time.Minute
					tk.Retry.MaxAttempts = 3
					tasks = append(tasks, tk)
					addrs = append(addrs, tk.Address())
				}
				tasks = append(tasks, with(task(dir, "report", -1, "sh", "-c", "cat reports/*.json > summary.json"),
					func(t *Task) { t.DependsOn = addrs }))
				return want{
					pools: []*Pool{p},
					tasks: tasks,
					vars:  map[string]cty.Value{"shards": cty.NumberIntVal(4)},
				}
			},
		},
		{
			name: "full",
			want: func(dir string) want {
				p := pool("gpu")
				p.Min, p.Max, p.Capacity = 2, 8, 4
				p.Labels = map[string]string{"gpu": "a100", "zone": "eu"}
				p.DrainTimeout = 5 * time.Minute
				p.Heartbeat = Heartbeat{Interval: 500 * time.Millisecond, TTL: 3 * time.Second}
				p.Settings = &testLocal{Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0", "N": "1"}}
				train := task(filepath.Join(dir, "work", "train"), "train", -1, "python", "train.py")
				train.Env = map[string]string{"EPOCHS": "10", "MODE": "full"}
				train.Placement = map[string]string{"gpu": "a100"}
				train.Timeout = 90 * time.Minute
				train.LeaseGrace = 30 * time.Second
				train.Retry = Retry{MaxAttempts: 5, MaxLost: 0, Backoff: time.Second, MaxBackoff: time.Minute}
				p.LaunchTimeout = 2 * time.Minute
				edge := pool("edge")
				edge.Provider, edge.Max, edge.Labels, edge.LaunchTimeout = "external", 3, map[string]string{"site": "edge"}, 10*time.Minute
				return want{
					settings: Settings{State: "var/state.db", Listen: "127.0.0.1:7070", Advertise: "https://coordinator.example:7070", MaxArtifactSize: 64 << 20,
						TLS: &TLSSettings{CertFile: filepath.Join(dir, "tls", "server.crt"), KeyFile: "/etc/wdc/server.key"}},
					pools: []*Pool{p, edge},
					tasks: []*Task{train, with(task("/tmp", "abs", -1, "ls"), func(t *Task) {
						t.Retry = Retry{MaxAttempts: 2, MaxLost: 3, Backoff: 0, MaxBackoff: 5 * time.Minute}
					})},
				}
			},
		},
		{
			name: "files",
			want: func(dir string) want {
				var tasks []*Task
				for i := range 2 {
					tasks = append(tasks, with(task(dir, "build", i, "sh", "-c", "mkdir -p out && cat data/*.txt > out/all.txt"), func(t *Task) {
						t.Inputs = []string{"data/a.txt", "data/b.txt", "data/sub/c.txt"}
						t.Outputs = []string{"out/*.txt"}
					}))
				}
				tasks = append(tasks,
					with(task(dir, "report", -1, "cat", "from-build/out/all.txt"), func(t *Task) {
						t.Outputs = []string{"report.html"}
						t.Mounts = []Mount{{Name: "from-build", From: "task.build[1]", Output: "out/*.txt"}}
						t.DependsOn = []string{"task.build[1]"}
					}),
					with(task("/tmp", "plain", -1, "true"), func(t *Task) { t.Inputs = []string{"data/b.txt"} }),
				)
				return want{pools: []*Pool{pool("p")}, tasks: tasks}
			},
		},
		{
			name: "count",
			want: func(dir string) want {
				var tasks []*Task
				for i := range 3 {
					tk := task(dir, "fetch", i, "fetch", "--part", string(rune('0'+i)))
					tk.Env = map[string]string{"PART": string(rune('0' + i))}
					tasks = append(tasks, tk)
				}
				tasks = append(tasks,
					with(task(dir, "one", -1, "one"), func(t *Task) { t.DependsOn = []string{"task.fetch[1]"} }),
					with(task(dir, "all", -1, "all"), func(t *Task) {
						t.DependsOn = []string{"task.fetch[0]", "task.fetch[1]", "task.fetch[2]", "task.one"}
					}),
					with(task(dir, "shard", 0, "shard", "1/2"), func(t *Task) {
						t.DependsOn = []string{"task.all"}
						t.Placement = map[string]string{"slot": "even"}
					}),
					with(task(dir, "shard", 1, "shard", "2/2"), func(t *Task) {
						t.DependsOn = []string{"task.all"}
						t.Placement = map[string]string{"slot": "odd"}
					}),
					task(dir, "after_zero", -1, "after"),
					task(dir, "unset", -1, "unset"),
				)
				return want{tasks: tasks}
			},
		},
		{
			name: "locals",
			want: func(dir string) want {
				tk := task(dir, "greet", -1, "sh", "-c", "echo Hello, WORLD")
				tk.Env = map[string]string{"WHO": "world", "ROOT": dir}
				return want{
					tasks: []*Task{tk},
					locals: map[string]cty.Value{
						"greeting": cty.StringVal("Hello, WORLD"),
						"prefix":   cty.StringVal("Hello"),
						"cmd":      cty.TupleVal([]cty.Value{cty.StringVal("sh"), cty.StringVal("-c"), cty.StringVal("echo Hello, WORLD")}),
						"base_env": cty.ObjectVal(map[string]cty.Value{"WHO": cty.StringVal("world")}),
					},
				}
			},
		},
		{
			name: "functions",
			want: func(dir string) want {
				return want{tasks: []*Task{task(dir, "f", -1,
					"fn", "a-b-c", "007", "x0", "x1", "x2", "abc", "4", `{"a":1}`, "v", "none",
					"a_b_c", "123", "t", "line", "ell", "first", "true", "a", "a,b,a,c", "k1,k2", "9", "tried")}}
			},
		},
		{
			name: "vars",
			want: func(dir string) want {
				tk := task(dir, "run", 0, "run", "default-name")
				tk.Env = map[string]string{"CPU": "1", "VERBOSE": "false", "LEVEL": "3", "U": "u", "SECRET": "hunter2"}
				tk.Sensitive.EnvKeys = map[string]bool{"SECRET": true} // from a sensitive variable
				tk.Sensitive.From = map[string][]string{"env.SECRET": {"var.secret"}}
				return want{
					tasks: []*Task{tk},
					vars: map[string]cty.Value{
						"name":     cty.StringVal("default-name"),
						"replicas": cty.NumberIntVal(1),
						"tags":     cty.ListValEmpty(cty.String),
						"limits":   cty.MapVal(map[string]cty.Value{"cpu": cty.NumberIntVal(1)}),
						"opts":     cty.ObjectVal(map[string]cty.Value{"verbose": cty.False, "level": cty.NumberIntVal(3)}),
					},
				}
			},
		},
		{
			name: "vars_precedence",
			in: func(dir string) Inputs {
				return Inputs{
					Environ: []string{
						"WDC_VAR_name=from-env",
						"WDC_VAR_untyped=from-env",
						"WDC_VAR_undeclared=ignored",
						"WDC_VAR_secret=from-env",
						"HOME=/root",
					},
					VarFiles: []string{
						filepath.Join(dir, "prod.vars.hcl"),
						filepath.Join(dir, "override.vars.hcl"),
						filepath.Join(dir, "vars.json"),
					},
					Vars: []string{"tags=[\"x\", \"y,z\"]", "opts={verbose=true}", "secret=a=b, c", "secret=last"},
				}
			},
			want: func(dir string) want {
				var tasks []*Task
				for i := range 2 {
					tk := task(dir, "run", i, "run", "from-second-file", "x", "y,z")
					tk.Env = map[string]string{"CPU": "4", "VERBOSE": "true", "LEVEL": "3", "U": "from-env", "SECRET": "last"}
					tk.Sensitive.EnvKeys = map[string]bool{"SECRET": true}
					tk.Sensitive.From = map[string][]string{"env.SECRET": {"var.secret"}}
					tasks = append(tasks, tk)
				}
				return want{
					tasks: tasks,
					vars: map[string]cty.Value{
						"name":     cty.StringVal("from-second-file"),
						"replicas": cty.NumberIntVal(2),
						"limits":   cty.MapVal(map[string]cty.Value{"cpu": cty.NumberIntVal(4), "mem": cty.NumberIntVal(8)}),
					},
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fixture := c.name
			if c.name == "vars_precedence" {
				fixture = "vars"
			}
			dir := filepath.Join("testdata", "valid", fixture)
			var in Inputs
			if c.in != nil {
				in = c.in(dir)
			}
			cfg := mustLoad(t, dir, in)
			adir := abs(t, dir)
			w := c.want(adir)
			if w.settings.MaxArtifactSize == 0 {
				w.settings.MaxArtifactSize = DefaultMaxArtifactSize
			}
			if cfg.Dir != adir {
				t.Errorf("Dir = %q, want %q", cfg.Dir, adir)
			}
			if diff := cmp.Diff(w.settings, cfg.Settings, cmpOpts); diff != "" {
				t.Errorf("Settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(w.pools, cfg.Pools, cmpOpts); diff != "" {
				t.Errorf("Pools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(w.tasks, cfg.Tasks, cmpOpts); diff != "" {
				t.Errorf("Tasks (-want +got):\n%s", diff)
			}
			for name, v := range w.vars {
				got, ok := cfg.Variables[name]
				if !ok {
					t.Errorf("variable %q missing", name)
					continue
				}
				if diff := cmp.Diff(v, got.Value, cmpOpts); diff != "" {
					t.Errorf("var.%s (-want +got):\n%s", name, diff)
				}
			}
			if w.locals != nil {
				if diff := cmp.Diff(w.locals, cfg.Locals, cmpOpts); diff != "" {
					t.Errorf("Locals (-want +got):\n%s", diff)
				}
			}
			for _, tk := range cfg.Tasks {
				if tk.Env == nil || tk.Placement == nil {
					t.Errorf("%s: nil Env or Placement", tk.Address())
				}
			}
		})
	}
}

func TestVariableDeclarations(t *testing.T) {
	cfg := mustLoad(t, "testdata/valid/vars", Inputs{})
	v := cfg.Variables["name"]
	if v.Description != "A name." || !v.HasDefault || v.Type != cty.String {
		t.Errorf("var.name = %+v", v)
	}
	if !cfg.Variables["secret"].Sensitive || cfg.Variables["name"].Sensitive {
		t.Error("sensitive not recorded")
	}
	if !cfg.Variables["untyped"].Type.Equals(cty.DynamicPseudoType) {
		t.Errorf("untyped has type %#v", cfg.Variables["untyped"].Type)
	}
	if !cfg.Variables["tags"].Type.Equals(cty.List(cty.String)) {
		t.Errorf("tags has type %#v", cfg.Variables["tags"].Type)
	}
}

func TestSourceRanges(t *testing.T) {
	cfg := mustLoad(t, "testdata/valid/design", Inputs{})
	p := cfg.Pools[0]
	if p.DeclRange.Start.Line != 6 || p.ProviderRange.Start.Line != 7 || p.LabelsRange.Start.Line != 11 {
		t.Errorf("pool ranges: decl %v provider %v labels %v", p.DeclRange, p.ProviderRange, p.LabelsRange)
	}
	tk := cfg.Tasks[0]
	if tk.DeclRange.Start.Line != 19 || tk.PlacementRange.Start.Line != 23 {
		t.Errorf("task ranges: decl %v placement %v", tk.DeclRange, tk.PlacementRange)
	}
	last := cfg.Tasks[len(cfg.Tasks)-1]
	if last.PlacementRange != last.DeclRange {
		t.Errorf("PlacementRange without placement = %v, want DeclRange %v", last.PlacementRange, last.DeclRange)
	}
	if filepath.Base(tk.DeclRange.Filename) != "main.wdc.hcl" {
		t.Errorf("filename %q", tk.DeclRange.Filename)
	}
	if _, ok := cfg.Files[tk.DeclRange.Filename]; !ok {
		t.Errorf("Files lacks %q: %v", tk.DeclRange.Filename, cfg.Files)
	}
}
