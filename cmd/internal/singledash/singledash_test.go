package singledash

import (
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
)

// grammar is a small command line with what the rewrite must tell apart:
// global and command flags, bool and valued ones, a short flag with a
// value, an alias, a negatable flag, a nested command and positionals.
type grammar struct {
	Chdir string `name:"chdir"`
	Plan  struct {
		Out              string   `name:"out" short:"o"`
		DetailedExitcode bool     `name:"detailed-exitcode"`
		Replace          []string `name:"replace" sep:"none"`
		Color            bool     `name:"color" negatable:""`
		Verbose          bool     `name:"verbose" short:"v" aliases:"loud"`
	} `cmd:""`
	Apply struct {
		AutoApprove bool   `name:"auto-approve"`
		PlanFile    string `arg:"" optional:""`
	} `cmd:""`
	Fmt struct {
		Paths []string `arg:"" optional:""`
	} `cmd:""`
	Workers struct {
		RenderLaunch struct {
			Seq  int    `name:"seq"`
			Pool string `arg:""`
		} `cmd:"" name:"render-launch"`
	} `cmd:""`
}

func newParser(t *testing.T) (*kong.Kong, *grammar) {
	t.Helper()
	var g grammar
	p, err := kong.New(&g, kong.Name("x"), kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatal(err)
	}
	return p, &g
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"valued flag with =", "plan -out=p.json", "plan --out=p.json"},
		{"valued flag then its value", "plan -out p.json", "plan --out p.json"},
		{"bool flags", "plan -detailed-exitcode", "plan --detailed-exitcode"},
		{"command flag after the positional", "apply p.json -auto-approve", "apply p.json --auto-approve"},
		{"global flag before the command", "-chdir dir plan", "--chdir dir plan"},
		{"global flag after the command", "plan -chdir=dir", "plan --chdir=dir"},
		{"repeated flag", "plan -replace task.a -replace=task.b", "plan --replace task.a --replace=task.b"},
		{"double dash kept", "plan --out p.json --detailed-exitcode", "plan --out p.json --detailed-exitcode"},
		{"help", "plan -help", "plan --help"},
		{"short flags kept", "plan -h -o p.json -v", "plan -h -o p.json -v"},
		{"short flag with its value attached", "plan -op.json", "plan -op.json"},
		{"a value that begins with a dash is not a flag", "plan -out -replace", "plan --out -replace"},
		{"a value after a double-dash flag", "plan --out -chdir", "plan --out -chdir"},
		{"a value after a short flag", "plan -o -chdir", "plan -o -chdir"},
		{"terminator", "fmt -- -chdir -out", "fmt -- -chdir -out"},
		{"stdin", "fmt -", "fmt -"},
		{"negative number", "workers render-launch -seq -1 p", "workers render-launch --seq -1 p"},
		{"nested command", "workers render-launch -seq=2 p", "workers render-launch --seq=2 p"},
		{"flag of another command is not in scope", "apply -out p.json", "apply --out p.json"},
		{"alias", "plan -loud", "plan --loud"},
		{"negation", "plan -no-color", "plan --no-color"},
		{"unknown long flag gets the long form", "plan -replac x", "plan --replac x"},
		{"unknown word beginning with a valued short flag is kong's", "plan -outt", "plan -outt"},
		{"unknown word beginning with a short flag is kong's", "plan -vx", "plan -vx"},
		{"positional word that is a command name elsewhere", "fmt plan -out", "fmt plan --out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := newParser(t)
			in := strings.Fields(tt.in)
			orig := append([]string(nil), in...)
			got := Rewrite(p.Model, in)
			if diff := cmp.Diff(strings.Fields(tt.want), got); diff != "" {
				t.Errorf("Rewrite(%q) (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(orig, in); diff != "" {
				t.Errorf("Rewrite changed its argument:\n%s", diff)
			}
		})
	}
}

// TestRewriteParses checks that what Rewrite returns parses into the
// values the single-dash words meant.
func TestRewriteParses(t *testing.T) {
	t.Parallel()
	p, g := newParser(t)
	args := strings.Fields("-chdir d plan -out=p.json -replace a -replace b -detailed-exitcode -no-color")
	if _, err := p.Parse(Rewrite(p.Model, args)); err != nil {
		t.Fatal(err)
	}
	if g.Chdir != "d" || g.Plan.Out != "p.json" || !g.Plan.DetailedExitcode || g.Plan.Color || len(g.Plan.Replace) != 2 {
		t.Errorf("parsed %+v", *g)
	}
}

// TestRewriteUnknownSuggestsLong checks that an unknown single-dash flag
// gets kong's suggestion of a long flag, not of a short one.
func TestRewriteUnknownSuggestsLong(t *testing.T) {
	t.Parallel()
	p, _ := newParser(t)
	_, err := p.Parse(Rewrite(p.Model, []string{"plan", "-detailed-exitcod"}))
	if err == nil || !strings.Contains(err.Error(), `did you mean "--detailed-exitcode"?`) {
		t.Errorf("error %v, want a suggestion of --detailed-exitcode", err)
	}
}
