package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/posener/complete"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// CompletionCmd prints a shell's completion script. The script makes the
// shell run wdc itself with COMP_LINE set, and wdc answers from its command
// model (kongplete): commands, flags, and task addresses and variable
// names read from the configuration.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: bash, zsh or fish."`
}

// Run prints the script for c.Shell. It names the program by its name,
// wdc, which the shell finds on PATH when Tab is pressed, not by this
// binary's path: the script keeps working after wdc is upgraded or moved.
func (c *CompletionCmd) Run(e *env) error {
	const program = "wdc"
	var script string
	switch c.Shell {
	case "bash":
		script = "# wdc completion for bash: add to ~/.bashrc\n" +
			"#   source <(wdc completion bash)\n" +
			"complete -o default -C %[1]s wdc\n"
	case "zsh":
		script = "# wdc completion for zsh: add to ~/.zshrc\n" +
			"#   source <(wdc completion zsh)\n" +
			"autoload -U +X bashcompinit && bashcompinit\n" +
			"complete -o default -C %[1]s wdc\n"
	case "fish":
		script = "# wdc completion for fish: save as ~/.config/fish/completions/wdc.fish\n" +
			"#   wdc completion fish > ~/.config/fish/completions/wdc.fish\n" +
			"function __wdc_complete\n" +
			"    set -lx COMP_LINE (commandline -cp)\n" +
			"    test -z (commandline -ct)\n" +
			"    and set COMP_LINE \"$COMP_LINE \"\n" +
			"    %[1]s\n" +
			"end\n" +
			"complete -f -c wdc -a '(__wdc_complete)'\n"
	}
	_, err := fmt.Fprintf(e.stdout, script, program)
	return err
}

// predictors are the completions of the flags and arguments tagged with
// predictor:"NAME".
func predictors() map[string]complete.Predictor {
	return map[string]complete.Predictor{
		"file":    complete.PredictFiles("*"),
		"dir":     complete.PredictDirs("*"),
		"address": complete.PredictFunc(predictAddresses),
		"var":     complete.PredictFunc(predictVars),
	}
}

// predictAddresses offers the task addresses of the configuration the
// command line names (--chdir, else the current folder): task.NAME for
// every block, task.NAME[INDEX] for every instance.
func predictAddresses(a complete.Args) []string {
	cfg := completionConfig(a)
	if cfg == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range cfg.Tasks {
		for _, addr := range []string{"task." + t.Name, t.Address()} {
			if !seen[addr] {
				seen[addr] = true
				out = append(out, addr)
			}
		}
	}
	return out
}

// predictVars offers NAME= for every variable the configuration declares.
func predictVars(a complete.Args) []string {
	cfg := completionConfig(a)
	if cfg == nil {
		return nil
	}
	var out []string
	for name := range cfg.Variables {
		out = append(out, name+"=")
	}
	sort.Strings(out)
	return out
}

// completionConfig loads the configuration for a completion, ignoring its
// errors (a required variable without a value still lists the tasks); nil
// when there is none. The folder is --chdir's, looked up in the whole line
// the shell passes (Args holds only the words after the command being
// completed).
func completionConfig(a complete.Args) *wdchcl.Config {
	words := strings.Fields(os.Getenv("COMP_LINE"))
	if len(words) == 0 {
		words = a.All
	}
	dir := "."
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, "--chdir="); ok {
			dir = v
		} else if w == "--chdir" && i+1 < len(words) {
			dir = words[i+1]
		}
	}
	cfg, _ := wdchcl.Load(dir, wdchcl.Inputs{Environ: os.Environ(), Providers: providers.Schemas()})
	return cfg
}
