package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
	"gopkg.in/yaml.v3"
)

// workflow is the part of a GitHub Actions workflow file cmdCIJob runs.
type workflow struct {
	Env      map[string]string `yaml:"env"`
	Defaults struct {
		Run struct {
			Shell string `yaml:"shell"`
		} `yaml:"run"`
	} `yaml:"defaults"`
	Jobs map[string]struct {
		If    string            `yaml:"if"`
		Env   map[string]string `yaml:"env"`
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var ghExpr = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)

// cmdCIJob runs one job of a GitHub Actions workflow the way a runner would,
// in the script's folder (the checkout), for a pull request event:
//
//	ci-job WORKFLOW JOB PR [merged]
//
// Run steps execute in order with bash --noprofile --norc -eo pipefail (the
// runner's `shell: bash`), with the workflow's, job's and step's env; the
// test's own WDC_STATE and WDC_PLANS, when set, override the workflow's
// runner paths. ${{ }} expressions may name env.X, vars.X and secrets.X
// (the test's environment variable X) and the event's
// github.event.action, github.event.pull_request.number, .merged,
// .merge_commit_sha and .head.sha. Of the uses steps, actions/checkout is
// a no-op (the folder is the checkout), actions/upload-artifact copies its
// path into artifacts/NAME/, and actions/cache/save and restore keep their
// path in $WORK/ci-cache/KEY/, which outlives the folder (as the cache
// outlives a hosted runner). GITHUB_STEP_SUMMARY is summary-JOB-PR.md;
// lines a step appends to GITHUB_ENV are in the environment of the steps
// after it. The job's if
// must hold for the event. Step output goes to the script's stdout and
// stderr; a failing step fails the command (use ! ci-job to expect it).
func cmdCIJob(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 || len(args) > 4 || (len(args) == 4 && args[3] != "merged") {
		ts.Fatalf("usage: ci-job WORKFLOW JOB PR [merged]")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	var wf workflow
	ts.Check(yaml.Unmarshal(b, &wf))
	job, ok := wf.Jobs[args[1]]
	if !ok {
		ts.Fatalf("ci-job: the workflow has no job %q", args[1])
	}
	if wf.Defaults.Run.Shell != "bash" {
		ts.Fatalf("ci-job: the workflow's run steps must default to shell: bash (pipefail); it says %q", wf.Defaults.Run.Shell)
	}
	pr, merged := args[2], len(args) == 4
	action := "synchronize"
	if merged {
		action = "closed"
	}
	ctx := map[string]string{
		"github.event.action":                        action,
		"github.event.pull_request.number":           pr,
		"github.event.pull_request.merged":           fmt.Sprint(merged),
		"github.event.pull_request.merge_commit_sha": strings.Repeat("0", 40),
		"github.event.pull_request.head.sha":         strings.Repeat("1", 40),
	}
	env := map[string]string{}
	expand := func(s string) string {
		return ghExpr.ReplaceAllStringFunc(s, func(m string) string {
			key := ghExpr.FindStringSubmatch(m)[1]
			if k, ok := strings.CutPrefix(key, "env."); ok {
				return env[k]
			}
			// Repository variables and secrets: the test's environment.
			if k, ok := strings.CutPrefix(key, "vars."); ok {
				return ts.Getenv(k)
			}
			if k, ok := strings.CutPrefix(key, "secrets."); ok {
				return ts.Getenv(k)
			}
			v, ok := ctx[key]
			if !ok {
				ts.Fatalf("ci-job: the test does not know the expression %s", m)
			}
			return v
		})
	}
	if runs, err := jobRuns(job.If, ctx); err != nil {
		ts.Fatalf("ci-job: job %s: %v", args[1], err)
	} else if !runs {
		ts.Fatalf("ci-job: job %s does not run for this event (if: %s)", args[1], job.If)
	}
	for _, layer := range []map[string]string{wf.Env, job.Env} {
		for k, v := range layer {
			env[k] = expand(v)
		}
	}
	for _, k := range []string{"WDC_STATE", "WDC_PLANS"} {
		if v := ts.Getenv(k); v != "" {
			env[k] = v
		}
	}
	work := ts.MkAbs(".")
	summary := filepath.Join(work, fmt.Sprintf("summary-%s-%s.md", args[1], pr))
	// GITHUB_ENV: what a step appends there (NAME=VALUE lines) is in the
	// environment of the steps after it.
	githubEnv := filepath.Join(work, fmt.Sprintf(".github-env-%s-%s", args[1], pr))
	ts.Check(os.WriteFile(githubEnv, nil, 0o644))
	// The Actions cache outlives the runner: one folder for the whole
	// script, $WORK/ci-cache/KEY.
	cacheDir := func(key string) string { return filepath.Join(ts.Getenv("WORK"), "ci-cache", key) }
	for i, st := range job.Steps {
		name := st.Name
		if name == "" {
			name = st.Uses
		}
		fmt.Fprintf(ts.Stdout(), "## step %d: %s\n", i+1, name)
		switch {
		case strings.HasPrefix(st.Uses, "actions/checkout@"):
			continue
		case strings.HasPrefix(st.Uses, "actions/upload-artifact@"):
			src := filepath.Join(work, expand(st.With["path"]))
			dst := filepath.Join(work, "artifacts", expand(st.With["name"]))
			ts.Check(os.MkdirAll(dst, 0o755))
			data, err := os.ReadFile(src)
			ts.Check(err)
			ts.Check(os.WriteFile(filepath.Join(dst, filepath.Base(src)), data, 0o644))
			continue
		case strings.HasPrefix(st.Uses, "actions/cache/save@"):
			dst := cacheDir(expand(st.With["key"]))
			if _, err := os.Stat(dst); err == nil {
				continue // a cache entry is never replaced
			}
			src := filepath.Join(work, expand(st.With["path"]))
			data, err := os.ReadFile(src)
			ts.Check(err)
			ts.Check(os.MkdirAll(dst, 0o755))
			ts.Check(os.WriteFile(filepath.Join(dst, filepath.Base(src)), data, 0o644))
			continue
		case strings.HasPrefix(st.Uses, "actions/cache/restore@"):
			dst := filepath.Join(work, expand(st.With["path"]))
			data, err := os.ReadFile(filepath.Join(cacheDir(expand(st.With["key"])), filepath.Base(dst)))
			if err != nil {
				if st.With["fail-on-cache-miss"] == "true" {
					fmt.Fprintf(ts.Stdout(), "Error: Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: %s\n", expand(st.With["key"]))
					if neg {
						return
					}
					ts.Fatalf("ci-job: step %d: cache miss for %s", i+1, expand(st.With["key"]))
				}
				continue
			}
			ts.Check(os.WriteFile(dst, data, 0o644))
			continue
		case st.Uses != "":
			ts.Fatalf("ci-job: step %d uses %s, which the test cannot stand in for", i+1, st.Uses)
		}
		stepEnv := map[string]string{}
		for k, v := range env {
			stepEnv[k] = v
		}
		for k, v := range st.Env {
			stepEnv[k] = expand(v)
		}
		if data, err := os.ReadFile(githubEnv); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					stepEnv[k] = v
				}
			}
		}
		script := filepath.Join(work, ".ci-step.sh")
		ts.Check(os.WriteFile(script, []byte(expand(st.Run)), 0o644))
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + ts.Getenv("PATH"), "HOME=" + ts.Getenv("HOME"), "TMPDIR=" + ts.Getenv("TMPDIR"),
			"GITHUB_WORKSPACE=" + work, "GITHUB_STEP_SUMMARY=" + summary, "GITHUB_ENV=" + githubEnv, "CI=true"}
		for k, v := range stepEnv {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
		if err := cmd.Run(); err != nil {
			if neg {
				return
			}
			ts.Fatalf("ci-job: step %d (%s) failed: %v", i+1, name, err)
		}
	}
	if neg {
		ts.Fatalf("ci-job: every step of job %s succeeded", args[1])
	}
}

// ifTerm is one comparison of a job condition the test understands.
var ifTerm = regexp.MustCompile(`^\s*([a-z_.]+)\s*(==|!=)\s*'?([^']*?)'?\s*$`)

// jobRuns evaluates a job's if for the event. It understands only what the
// example uses, a conjunction (&&) of "NAME == 'VALUE'", "NAME != 'VALUE'"
// and "NAME == true" over ctx, and says so for anything else.
func jobRuns(cond string, ctx map[string]string) (bool, error) {
	if cond == "" {
		return true, nil
	}
	for _, part := range strings.Split(cond, "&&") {
		m := ifTerm.FindStringSubmatch(part)
		if m == nil {
			return false, fmt.Errorf("the test cannot evaluate the condition %q", cond)
		}
		if _, known := ctx[m[1]]; !known {
			return false, fmt.Errorf("the test does not know %s (in %q)", m[1], cond)
		}
		if (ctx[m[1]] == m[3]) != (m[2] == "==") {
			return false, nil
		}
	}
	return true, nil
}
