package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestRayScripts runs the end-to-end scripts in testdata/ray-scripts
// against a real Ray head (scripts/test-ray.sh starts a throwaway one with
// scripts/ray-head.sh). It is skipped without WDC_TEST_RAY_ADDRESS and
// reads:
//
//	WDC_TEST_RAY_ADDRESS     the head's dashboard (Jobs API) URL
//	WDC_TEST_RAY_TOKEN_FILE  a file holding its token (token authentication)
//	WDC_TEST_RAY_WDC         the wdc binary the Ray jobs run (they run on
//	                         this machine); without it the test builds one
//	WDC_TEST_RAY_AGENT       the agent a pool without wdc_path uploads
//	                         (the scripts' WDC_AGENT_BINARY; default
//	                         WDC_TEST_RAY_WDC: the test binary that runs
//	                         the scripts as wdc is no agent)
//
// Scripts get, besides what TestScripts gives them, $RAY_ADDRESS,
// $RAY_TOKEN_FILE and $RAY_WDC, and the same as the input variables
// ray_address, ray_token_file and wdc_path (WDC_VAR_…), for the
// configurations that declare them, and the commands ray-jobs and
// ray-stop below. A script that fails half-way gets the jobs of its state
// (metadata wdc.lineage) that still run stopped when it ends. The scripts
// share one head of 2 CPUs: run them one at a time (go test -parallel 1).
func TestRayScripts(t *testing.T) {
	address := os.Getenv("WDC_TEST_RAY_ADDRESS")
	if address == "" {
		t.Skip("no Ray head: set WDC_TEST_RAY_ADDRESS, WDC_TEST_RAY_TOKEN_FILE and WDC_TEST_RAY_WDC (scripts/test-ray.sh starts a head and sets them)")
	}
	tokenFile := os.Getenv("WDC_TEST_RAY_TOKEN_FILE")
	if tokenFile != "" {
		abs, err := filepath.Abs(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		tokenFile = abs
	}
	wdc := os.Getenv("WDC_TEST_RAY_WDC")
	if wdc == "" {
		wdc = filepath.Join(t.TempDir(), "wdc")
		cmd := exec.Command("go", "build", "-o", wdc, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the wdc the Ray jobs run (or set WDC_TEST_RAY_WDC): %v\n%s", err, out)
		}
	}
	wdc, err := filepath.Abs(wdc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wdc); err != nil {
		t.Fatalf("WDC_TEST_RAY_WDC: %v", err)
	}
	agentBin := os.Getenv("WDC_TEST_RAY_AGENT")
	if agentBin == "" {
		agentBin = wdc
	}
	if agentBin, err = filepath.Abs(agentBin); err != nil {
		t.Fatal(err)
	}
	head := rayHead{address: strings.TrimRight(address, "/"), tokenFile: tokenFile}
	if _, err := head.do(http.MethodGet, "/api/version"); err != nil {
		t.Fatalf("the Ray head at %s does not answer: %v", address, err)
	}
	p := scriptParams("ray-scripts")
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Values[rayHeadKey{}] = head
		for k, v := range map[string]string{
			"RAY_ADDRESS": head.address, "RAY_TOKEN_FILE": tokenFile, "RAY_WDC": wdc, "WDC_AGENT_BINARY": agentBin,
			"WDC_VAR_ray_address": head.address, "WDC_VAR_ray_token_file": tokenFile, "WDC_VAR_wdc_path": wdc,
		} {
			env.Setenv(k, v)
		}
		work := env.WorkDir
		env.Defer(func() {
			// The safety net of a script that failed half-way: stop the
			// jobs of its state that still run (best effort).
			lineage := stateLineage(work)
			if lineage == "" {
				return
			}
			jobs, err := head.jobs()
			if err != nil {
				return
			}
			for _, j := range jobs {
				if j.Metadata["wdc.lineage"] == lineage && !j.finished() {
					head.do(http.MethodPost, "/api/jobs/"+url.PathEscape(j.SubmissionID)+"/stop") //nolint:errcheck // best effort
				}
			}
		})
		return nil
	}
	p.Cmds["ray-jobs"] = cmdRayJobs
	p.Cmds["ray-stop"] = cmdRayStop
	testscript.Run(t, p)
}

type rayHeadKey struct{}

// rayHead is the Jobs API of the head the scripts run against.
type rayHead struct {
	address, tokenFile string
}

// rayJob is what the scripts look at of a job of GET /api/jobs/.
type rayJob struct {
	Type         string            `json:"type"`
	SubmissionID string            `json:"submission_id"`
	Status       string            `json:"status"`
	Metadata     map[string]string `json:"metadata"`
	StartTime    int64             `json:"start_time"`
}

// finished reports whether the job reached a status that never changes.
func (j rayJob) finished() bool {
	switch j.Status {
	case "SUCCEEDED", "FAILED", "STOPPED":
		return true
	}
	return false
}

// do sends a request with the head's token and returns the body of a 200
// answer.
func (h rayHead) do(method, path string) ([]byte, error) {
	req, err := http.NewRequest(method, h.address+path, nil)
	if err != nil {
		return nil, err
	}
	if h.tokenFile != "" {
		b, err := os.ReadFile(h.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// jobs returns the submitted jobs of the head (not its DRIVER jobs), by
// start time.
func (h rayHead) jobs() ([]rayJob, error) {
	body, err := h.do(http.MethodGet, "/api/jobs/")
	if err != nil {
		return nil, err
	}
	var all []rayJob
	if err := json.Unmarshal(body, &all); err != nil {
		return nil, fmt.Errorf("GET /api/jobs/: %v", err)
	}
	var out []rayJob
	for _, j := range all {
		if j.Type != "DRIVER" {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(i, k int) bool {
		if out[i].StartTime != out[k].StartTime {
			return out[i].StartTime < out[k].StartTime
		}
		return out[i].SubmissionID < out[k].SubmissionID
	})
	return out, nil
}

// stateLineage returns the lineage of the default state file in dir, or ""
// when there is none (yet).
func stateLineage(dir string) string {
	snap, err := readSnapshot(context.Background(), filepath.Join(dir, defaultStatePath))
	if err != nil {
		return ""
	}
	return snap.Lineage
}

// cmdRayJobs lists the submitted jobs of the Ray head (GET /api/jobs/,
// without DRIVER jobs), one submission id a line, by start time, and sets
// RAY_JOBS to them (space-separated):
//
//	ray-jobs [--running] [--mine] [--status] [--metadata K=V]... [--max-live N]
//
// --running keeps the jobs not finished (PENDING or RUNNING); --mine the
// jobs of the state in the current directory (metadata wdc.lineage is its
// lineage; it fails when there is no state); --metadata K=V the jobs whose
// metadata K is V; --status prints each job's status after its id.
//
// --max-live N watches instead of listing once: it polls every 100 ms,
// until the apply of the state in the current directory has released its
// lock (at most 3 min), and fails as soon as more than N matching jobs are
// PENDING or RUNNING at once; then it prints each job it saw live, by
// first sight, and "peak N", the most it saw live at once.
func cmdRayJobs(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: ray-jobs [--running] [--mine] [--status] [--metadata K=V]... [--max-live N]"
	if neg {
		ts.Fatalf("ray-jobs does not support !: use ! stdout .")
	}
	head := ts.Value(rayHeadKey{}).(rayHead)
	out := ts.Stdout() // an empty listing is an empty stdout, not the last command's
	running, mine, status, maxLive := false, false, false, -1
	meta := map[string]string{}
	for len(args) > 0 {
		switch {
		case args[0] == "--running":
			running = true
		case args[0] == "--mine":
			mine = true
		case args[0] == "--status":
			status = true
		case args[0] == "--metadata" && len(args) > 1:
			k, v, ok := strings.Cut(args[1], "=")
			if !ok {
				ts.Fatalf("%s", usage)
			}
			meta[k] = v
			args = args[1:]
		case args[0] == "--max-live" && len(args) > 1:
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				ts.Fatalf("%s", usage)
			}
			maxLive = n
			args = args[1:]
		default:
			ts.Fatalf("%s", usage)
		}
		args = args[1:]
	}
	if mine {
		lineage := stateLineage(ts.MkAbs("."))
		if lineage == "" {
			ts.Fatalf("ray-jobs --mine: no state in %s", ts.MkAbs("."))
		}
		meta["wdc.lineage"] = lineage
	}
	match := func(j rayJob) bool {
		for k, v := range meta {
			if j.Metadata[k] != v {
				return false
			}
		}
		return !running || !j.finished()
	}
	if maxLive >= 0 {
		watchRayJobs(ts, out, head, match, maxLive)
		return
	}
	jobs, err := head.jobs()
	ts.Check(err)
	var ids []string
	for _, j := range jobs {
		if !match(j) {
			continue
		}
		ids = append(ids, j.SubmissionID)
		if status {
			fmt.Fprintf(out, "%s %s\n", j.SubmissionID, j.Status)
		} else {
			fmt.Fprintln(out, j.SubmissionID)
		}
	}
	ts.Setenv("RAY_JOBS", strings.Join(ids, " "))
}

// watchRayJobs is ray-jobs --max-live.
func watchRayJobs(ts *testscript.TestScript, out io.Writer, head rayHead, match func(rayJob) bool, max int) {
	path := filepath.Join(ts.MkAbs("."), defaultStatePath)
	deadline := time.Now().Add(3 * time.Minute)
	var seen []string
	known := map[string]bool{}
	peak := 0
	for {
		// Read the lock first: the jobs listed after it was released are
		// all the apply left.
		snap, snapErr := readSnapshot(context.Background(), path)
		jobs, err := head.jobs()
		ts.Check(err)
		var live []string
		for _, j := range jobs {
			if match(j) && !j.finished() {
				live = append(live, j.SubmissionID)
				if !known[j.SubmissionID] {
					known[j.SubmissionID] = true
					seen = append(seen, j.SubmissionID)
				}
			}
		}
		if len(live) > peak {
			peak = len(live)
		}
		if len(live) > max {
			ts.Fatalf("ray-jobs --max-live %d: %d jobs live at once: %s", max, len(live), strings.Join(live, " "))
		}
		if snapErr == nil && snap.Lock == nil {
			break
		}
		if time.Now().After(deadline) {
			ts.Fatalf("ray-jobs --max-live %d: the apply still holds the lock of %s after 3m", max, path)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range seen {
		fmt.Fprintf(out, "%s\n", id)
	}
	fmt.Fprintf(out, "peak %d\n", peak)
	ts.Setenv("RAY_JOBS", strings.Join(seen, " "))
}

// cmdRayStop stops Ray jobs through the Jobs API (POST
// /api/jobs/{id}/stop, as a user would), failing unless the head answers
// 200 for each:
//
//	ray-stop ID...
//
// An argument may hold several ids separated by spaces, as $RAY_JOBS does
// (testscript does not split a variable's value into words).
func cmdRayStop(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: ray-stop ID...")
	}
	head := ts.Value(rayHeadKey{}).(rayHead)
	out := ts.Stdout()
	var ids []string
	for _, a := range args {
		ids = append(ids, strings.Fields(a)...)
	}
	if len(ids) == 0 {
		ts.Fatalf("ray-stop: no job id")
	}
	for _, id := range ids {
		body, err := head.do(http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop")
		ts.Check(err)
		fmt.Fprintf(out, "%s %s\n", id, strings.TrimSpace(string(body)))
	}
}

// TestRayHeadClient checks the scripts' Jobs API client against a fake
// head: the token sent as a bearer credential, DRIVER jobs left out, jobs
// by start time, and an answer other than 200 an error naming it.
func TestRayHeadClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /api/jobs/":
			io.WriteString(w, `[{"type":"SUBMISSION","submission_id":"b","status":"RUNNING","start_time":2,"metadata":{"wdc.pool":"r"}},
				{"type":"DRIVER","submission_id":null,"status":"RUNNING","start_time":0},
				{"type":"SUBMISSION","submission_id":"a","status":"STOPPED","start_time":1,"metadata":{}}]`)
		case "POST /api/jobs/a/stop":
			io.WriteString(w, `{"stopped": false}`)
		default:
			http.Error(w, "Job nope does not exist", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := rayHead{address: srv.URL, tokenFile: token}
	jobs, err := head.jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].SubmissionID != "a" || !jobs[0].finished() || jobs[1].SubmissionID != "b" || jobs[1].finished() || jobs[1].Metadata["wdc.pool"] != "r" {
		t.Errorf("jobs = %+v, want a (finished) then b (running, pool r)", jobs)
	}
	if body, err := head.do(http.MethodPost, "/api/jobs/a/stop"); err != nil || string(body) != `{"stopped": false}` {
		t.Errorf("stop a = %q, %v", body, err)
	}
	if _, err := head.do(http.MethodPost, "/api/jobs/nope/stop"); err == nil || !strings.Contains(err.Error(), "404 Not Found: Job nope does not exist") {
		t.Errorf("stop nope: %v, want the 404 and its text", err)
	}
	if _, err := (rayHead{address: srv.URL}).jobs(); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the token: %v, want a 401", err)
	}
}
