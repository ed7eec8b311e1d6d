package ray

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRay reproduces the answers of a Ray head's Jobs REST API as
// PROVIDERS.md §A records them: a JSON array for the job list (with a
// DRIVER job in it), plain-text 404s, 500s with text bodies for a
// duplicate submission id and for a head with no agent, a 400 traceback
// for an unknown field, a refused DELETE of a job that has not ended. It
// runs nothing: tests move jobs through their statuses with set.
type fakeRay struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	token       string // required as a bearer token when set
	version     string // ray_version
	jobs        map[string]*JobDetails
	order       []string
	logs        map[string]string
	unavailable int // the next n submissions get "No available agent"
	loseAnswers int // the next n submissions are made, then their answer lost
	submissions []JobSubmission
	requests    []string // "METHOD PATH" of every request
	// onStop is what a stop does to a running job (default: STOPPED).
	onStop func(j *JobDetails)
	// resurrect writes a deleted job back after this long, FAILED and
	// without its metadata, once, as Ray's job manager does when the
	// job's supervisor actor dies after the delete (0: never).
	resurrect time.Duration
	// packages are the uploaded packages by name; maxPackage, when not
	// 0, refuses a larger upload as Ray does (a 500 and its traceback).
	packages   map[string][]byte
	maxPackage int
}

func newFakeRay(t *testing.T) *fakeRay {
	f := &fakeRay{t: t, version: "2.60.0", jobs: map[string]*JobDetails{}, logs: map[string]string{}, packages: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRay) client() *Client { return &Client{Address: f.srv.URL, Token: f.token} }

// set moves a job to a status, with an exit code and a message.
func (f *fakeRay) set(id, status string, exit *int, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	if j == nil {
		f.t.Fatalf("fake ray: no job %s", id)
	}
	j.Status, j.DriverExitCode, j.Message = status, exit, message
}

func (f *fakeRay) log(id, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[id] += s
}

func (f *fakeRay) job(id string) (JobDetails, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return JobDetails{}, false
	}
	return *j, true
}

func (f *fakeRay) count(req string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r == req {
			n++
		}
	}
	return n
}

// add puts a job on the head as if someone had submitted it.
func (f *fakeRay) add(j JobDetails) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[j.SubmissionID] = &j
	f.order = append(f.order, j.SubmissionID)
}

func text(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, s)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // a test server
}

func (f *fakeRay) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		text(w, http.StatusUnauthorized, "401: Unauthorized: missing or invalid authentication token")
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/api/version":
		writeJSON(w, Version{Version: "4", RayVersion: f.version, RayCommit: "abc", SessionName: "session_x"})
	case r.Method == http.MethodPost && path == "/api/jobs/":
		f.submit(w, r)
	case strings.HasPrefix(path, "/api/packages/gcs/"):
		name := strings.TrimPrefix(path, "/api/packages/gcs/")
		switch r.Method {
		case http.MethodGet:
			if _, ok := f.packages[name]; !ok {
				text(w, http.StatusNotFound, "Package gcs://"+name+" does not exist")
				return
			}
		case http.MethodPut:
			data, _ := io.ReadAll(r.Body)
			if f.maxPackage > 0 && len(data) > f.maxPackage {
				text(w, http.StatusInternalServerError, "Traceback (most recent call last):\n  ...\nValueError: Package size (5.00MiB) exceeds the maximum size of 1.00MiB.")
				return
			}
			f.packages[name] = data
		}
	case r.Method == http.MethodGet && path == "/api/jobs/":
		list := []JobDetails{{Type: "DRIVER", Status: StatusRunning, Entrypoint: "python x.py"}}
		for _, id := range f.order {
			if j := f.jobs[id]; j != nil {
				list = append(list, *j)
			}
		}
		writeJSON(w, list)
	case strings.HasPrefix(path, "/api/jobs/"):
		rest := strings.TrimPrefix(path, "/api/jobs/")
		id, verb, _ := strings.Cut(rest, "/")
		j := f.jobs[id]
		if j == nil {
			text(w, http.StatusNotFound, fmt.Sprintf("Job %s does not exist", id))
			return
		}
		switch {
		case r.Method == http.MethodGet && verb == "":
			writeJSON(w, j)
		case r.Method == http.MethodPost && verb == "stop":
			if Terminal(j.Status) {
				writeJSON(w, map[string]bool{"stopped": false})
				return
			}
			if f.onStop != nil {
				f.onStop(j)
			} else {
				j.Status, j.Message = StatusStopped, "Job was intentionally stopped."
			}
			writeJSON(w, map[string]bool{"stopped": true})
		case r.Method == http.MethodDelete && verb == "":
			if !Terminal(j.Status) {
				text(w, http.StatusBadRequest, fmt.Sprintf("Attempted to delete job with id '%s', but it is in a non-terminal state %s.", id, j.Status))
				return
			}
			delete(f.jobs, id)
			if f.resurrect > 0 {
				after, ghost := f.resurrect, JobDetails{SubmissionID: id, Type: "SUBMISSION", Status: "FAILED", Entrypoint: "Entrypoint not found.", Message: "Job supervisor actor died"}
				f.resurrect = 0
				time.AfterFunc(after, func() { f.add(ghost) })
			}
			writeJSON(w, map[string]bool{"deleted": true})
		case r.Method == http.MethodGet && verb == "logs":
			writeJSON(w, map[string]string{"logs": f.logs[id]})
		default:
			text(w, http.StatusMethodNotAllowed, "405: Method Not Allowed")
		}
	default:
		text(w, http.StatusNotFound, "404: Not Found")
	}
}

func (f *fakeRay) submit(w http.ResponseWriter, r *http.Request) {
	var s JobSubmission
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		text(w, http.StatusBadRequest, "Traceback (most recent call last):\n  File \"job_head.py\", line 1\nTypeError: JobSubmitRequest.__init__() got an unexpected keyword argument: "+err.Error())
		return
	}
	f.submissions = append(f.submissions, s)
	if f.unavailable > 0 {
		f.unavailable--
		text(w, http.StatusInternalServerError, "No available agent to submit job, please try again later.")
		return
	}
	id := s.SubmissionID
	if id == "" {
		id = fmt.Sprintf("raysubmit_%d", len(f.order))
	}
	if f.jobs[id] != nil {
		text(w, http.StatusInternalServerError, "Traceback (most recent call last):\n  File \"job_manager.py\"\nValueError: Job with submission_id "+id+" already exists. Please use a different submission_id.")
		return
	}
	f.jobs[id] = &JobDetails{Type: "SUBMISSION", SubmissionID: id, Status: StatusPending, Entrypoint: s.Entrypoint,
		Metadata: s.Metadata, Message: "Job has not started yet."}
	f.order = append(f.order, id)
	if f.loseAnswers > 0 {
		f.loseAnswers--
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(map[string]string{"job_id": id, "submission_id": id}) //nolint:errcheck // a test server
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes()) //nolint:errcheck // a test server
}
