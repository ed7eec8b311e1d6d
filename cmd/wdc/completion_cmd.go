package main

import (
	"fmt"
	"os"
	"path/filepath"
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

// Run prints the script for c.Shell, naming this wdc by its absolute path.
func (c *CompletionCmd) Run(e *env) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this wdc's path: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return err
	}
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
	_, err = fmt.Fprintf(e.stdout, script, shellQuote(exe))
	return err
}

// shellQuote quotes s for sh, bash, zsh and fish when it needs it.
func shellQuote(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
