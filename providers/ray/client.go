package ray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Errors of the Client. An answer Ray gives without a code of its own (a
// 500 with a text body) is matched by its text; every other 4xx or 5xx is
// an *HTTPError.
var (
	// ErrNotFound: Ray has no job of that submission id (404).
	ErrNotFound = errors.New("ray: no such job")
	// ErrAlreadyExists: a job with that submission id exists already (a
	// 500 whose text says "already exists"): a submission retried after
	// its answer was lost gets it.
	ErrAlreadyExists = errors.New("ray: a job with that submission id exists already")
	// ErrUnavailable: the head has no agent to take the submission yet (a
	// 500 saying "No available agent to submit job"); Submit retries it.
	ErrUnavailable = errors.New("ray: no agent available to submit the job")
	// ErrUnauthorized: Ray refused the token, or wants one (401 or 403).
	ErrUnauthorized = errors.New("ray: not authorized (check token_file or RAY_AUTH_TOKEN)")
)

// HTTPError is a 4xx or 5xx answer of Ray's that no other error names,
// with its body (Ray answers most errors with plain text, often a Python
// traceback).
type HTTPError struct {
	Method, Path string
	Status       int
	Body         string
}

// Error gives the request, the status and the start of the body.
func (e *HTTPError) Error() string {
	body := strings.TrimSpace(e.Body)
	if len(body) > 2000 {
		body = body[:2000] + "…"
	}
	return fmt.Sprintf("ray: %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), body)
}

// Version is the answer of GET /api/version.
type Version struct {
	Version     string `json:"version"`
	RayVersion  string `json:"ray_version"`
	RayCommit   string `json:"ray_commit"`
	SessionName string `json:"session_name"`
}

// JobSubmission is the body of POST /api/jobs/. Ray builds its request
// object from the JSON's keys, so an unknown key or a wrong type is a 400:
// every optional field is left out when empty.
type JobSubmission struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id,omitempty"`
	RuntimeEnv          *RuntimeEnv        `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   float64            `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   float64            `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    int64              `json:"entrypoint_memory,omitempty"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// RuntimeEnv is the part of a job's runtime_env wdc sets: the entrypoint's
// environment variables and working folder.
type RuntimeEnv struct {
	// WorkingDir is the URI of a package Ray unpacks on the node that
	// runs the entrypoint, and runs it in (the agent's package, for a
	// pool without wdc_path).
	WorkingDir string            `json:"working_dir,omitempty"`
	EnvVars    map[string]string `json:"env_vars,omitempty"`
}

// Job statuses (JobDetails.Status). The last three are terminal: they
// never change.
const (
	StatusPending   = "PENDING"
	StatusRunning   = "RUNNING"
	StatusStopped   = "STOPPED"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// Terminal reports whether a job of that status has ended for good.
func Terminal(status string) bool {
	return status == StatusStopped || status == StatusSucceeded || status == StatusFailed
}

// JobDetails is a job as GET /api/jobs/{id} and GET /api/jobs/ give it
// (the fields wdc reads). JobID stays null for an entrypoint that never
// calls ray.init, such as wdc's agent: jobs are known by SubmissionID.
type JobDetails struct {
	// Type is "SUBMISSION" for a job submitted through the Jobs API,
	// "DRIVER" for a driver that connected by itself.
	Type         string            `json:"type"`
	SubmissionID string            `json:"submission_id"`
	JobID        *string           `json:"job_id"`
	Status       string            `json:"status"`
	Message      string            `json:"message"`
	ErrorType    string            `json:"error_type"`
	Entrypoint   string            `json:"entrypoint"`
	Metadata     map[string]string `json:"metadata"`
	// StartTime and EndTime are Unix milliseconds (0 when not yet).
	StartTime int64 `json:"start_time"`
	EndTime   int64 `json:"end_time"`
	// DriverExitCode is the entrypoint's exit code, once it exited by
	// itself (nil while it runs, and for a STOPPED job).
	DriverExitCode *int   `json:"driver_exit_code"`
	DriverNodeID   string `json:"driver_node_id"`
}

// Client talks to one Ray head's Jobs REST API. Safe for concurrent use.
type Client struct {
	// Address is the dashboard's base URL, without a trailing slash.
	Address string
	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTP does the requests (http.DefaultClient when nil). Each call
	// bounds itself by its ctx.
	HTTP *http.Client
	// Backoff spaces Submit's retries of ErrUnavailable and of lost
	// answers (DefaultBackoff when its Steps is 0).
	Backoff wait.Backoff
}

// DefaultBackoff retries a submission 4 times, 250 ms to 2 s apart.
var DefaultBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5}

// maxBody bounds what the client reads of one answer (a job's log can be
// large; the rest is kept by Ray).
const maxBody = 64 << 20

// do sends one request and returns the answer's body when Ray answered
// 2xx; otherwise the typed error.
func (c *Client) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	if in == nil {
		return c.send(ctx, method, path, nil, "")
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("ray: encoding %s %s: %w", method, path, err)
	}
	return c.send(ctx, method, path, b, "application/json")
}

// send sends one request with body (none when nil) of contentType and
// returns the answer's body when Ray answered 2xx; otherwise the typed
// error.
func (c *Client) send(ctx context.Context, method, path string, in []byte, contentType string) ([]byte, error) {
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Address+path, body)
	if err != nil {
		return nil, fmt.Errorf("ray: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "wdc")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &TransportError{Method: method, Path: path, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &TransportError{Method: method, Path: path, Err: err}
	}
	return data, classify(method, path, resp.StatusCode, data)
}

// classify turns a status and body into the client's error (nil for 2xx).
func classify(method, path string, status int, body []byte) error {
	text := string(body)
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusNotFound:
		return fmt.Errorf("%w: %s %s: %s", ErrNotFound, method, path, strings.TrimSpace(firstLine(text)))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fmt.Errorf("%w: %w", ErrUnauthorized, &HTTPError{Method: method, Path: path, Status: status, Body: text})
	case method == http.MethodPost && path == "/api/jobs/" && strings.Contains(text, "already exists"):
		return fmt.Errorf("%w: %s", ErrAlreadyExists, strings.TrimSpace(firstLine(text)))
	case strings.Contains(text, "No available agent"):
		return fmt.Errorf("%w: %s", ErrUnavailable, strings.TrimSpace(firstLine(text)))
	}
	return &HTTPError{Method: method, Path: path, Status: status, Body: text}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		// A traceback ends with the exception's line: that is the news.
		return s[i+1:]
	}
	return s
}

// TransportError is a request that got no answer (a refused connection,
// a timeout, a connection closed before the answer): Ray may or may not
// have acted on it.
type TransportError struct {
	Method, Path string
	Err          error
}

// Error names the request and the cause.
func (e *TransportError) Error() string {
	return fmt.Sprintf("ray: %s %s: no answer: %v", e.Method, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// decode decodes a JSON answer into out, naming the request on failure.
func decode(path string, data []byte, out any) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("ray: the answer to %s is not what Ray sends: %w", path, err)
	}
	return nil
}

// Version returns GET /api/version: the readiness probe.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	data, err := c.do(ctx, http.MethodGet, "/api/version", nil)
	if err != nil {
		return v, err
	}
	return v, decode("/api/version", data, &v)
}

// Submit posts a job (POST /api/jobs/, the trailing slash is Ray's) and
// returns its submission id. ErrUnavailable and lost answers are retried
// with c.Backoff: a retried submission whose first try got through is
// answered ErrAlreadyExists, which the caller resolves by reading the
// job. Other errors are returned at once.
func (c *Client) Submit(ctx context.Context, s JobSubmission) (string, error) {
	b := c.Backoff
	if b.Steps == 0 {
		b = DefaultBackoff
	}
	var id string
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		data, err := c.do(ctx, http.MethodPost, "/api/jobs/", s)
		var te *TransportError
		switch {
		case err == nil:
			var out struct {
				SubmissionID string `json:"submission_id"`
				JobID        string `json:"job_id"`
			}
			if err := decode("/api/jobs/", data, &out); err != nil {
				return false, err
			}
			id = out.SubmissionID
			if id == "" {
				id = out.JobID
			}
			return true, nil
		case errors.Is(err, ErrUnavailable), errors.As(err, &te) && ctx.Err() == nil:
			last = err
			return false, nil
		}
		return false, err
	})
	if wait.Interrupted(err) && last != nil {
		return "", fmt.Errorf("ray: submitting job %s: gave up after %d tries: %w", s.SubmissionID, b.Steps, last)
	}
	if err != nil {
		return "", err
	}
	return id, nil
}

// packagePath is the Jobs API path of a package's URI
// ("gcs://NAME.zip" is /api/packages/gcs/NAME.zip).
func packagePath(uri string) (string, error) {
	proto, name, ok := strings.Cut(uri, "://")
	if !ok || proto == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("ray: %q is not a package URI (gcs://NAME.zip)", uri)
	}
	return "/api/packages/" + url.PathEscape(proto) + "/" + url.PathEscape(name), nil
}

// PackageExists reports whether the head has the package uri (GET
// /api/packages/PROTOCOL/NAME: 200, or 404 for none). Ray pins a package
// it is asked about for a while, so that it stays until a job names it.
func (c *Client) PackageExists(ctx context.Context, uri string) (bool, error) {
	p, err := packagePath(uri)
	if err != nil {
		return false, err
	}
	_, err = c.send(ctx, http.MethodGet, p, nil, "")
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// UploadPackage puts the zip data on the head as the package uri (PUT
// /api/packages/PROTOCOL/NAME), as `ray job submit --working-dir` does.
// Ray answers a package it cannot store (larger than its gRPC message
// limit) with a 500 and its traceback.
func (c *Client) UploadPackage(ctx context.Context, uri string, data []byte) error {
	p, err := packagePath(uri)
	if err != nil {
		return err
	}
	_, err = c.send(ctx, http.MethodPut, p, data, "application/zip")
	return err
}

// Job returns GET /api/jobs/{id}; ErrNotFound when Ray has no such job.
func (c *Client) Job(ctx context.Context, id string) (JobDetails, error) {
	var j JobDetails
	p := "/api/jobs/" + url.PathEscape(id)
	data, err := c.do(ctx, http.MethodGet, p, nil)
	if err != nil {
		return j, err
	}
	return j, decode(p, data, &j)
}

// Jobs returns GET /api/jobs/: every job the head knows, DRIVER jobs
// included.
func (c *Client) Jobs(ctx context.Context) ([]JobDetails, error) {
	var js []JobDetails
	data, err := c.do(ctx, http.MethodGet, "/api/jobs/", nil)
	if err != nil {
		return nil, err
	}
	return js, decode("/api/jobs/", data, &js)
}

// Stop asks Ray to stop a job (POST /api/jobs/{id}/stop): Ray sends the
// entrypoint's process tree SIGTERM, and SIGKILL after
// RAY_JOB_STOP_WAIT_TIME_S (3 s by default). stopped is false for a job
// that had ended already.
func (c *Client) Stop(ctx context.Context, id string) (stopped bool, err error) {
	p := "/api/jobs/" + url.PathEscape(id) + "/stop"
	data, err := c.do(ctx, http.MethodPost, p, nil)
	if err != nil {
		return false, err
	}
	var out struct {
		Stopped bool `json:"stopped"`
	}
	return out.Stopped, decode(p, data, &out)
}

// Delete deletes a job's record (DELETE /api/jobs/{id}); Ray refuses it
// (an *HTTPError) for a job that has not ended, and keeps the log files.
func (c *Client) Delete(ctx context.Context, id string) (deleted bool, err error) {
	p := "/api/jobs/" + url.PathEscape(id)
	data, err := c.do(ctx, http.MethodDelete, p, nil)
	if err != nil {
		return false, err
	}
	var out struct {
		Deleted bool `json:"deleted"`
	}
	return out.Deleted, decode(p, data, &out)
}

// Logs returns a job's whole driver log so far (GET /api/jobs/{id}/logs).
func (c *Client) Logs(ctx context.Context, id string) (string, error) {
	p := "/api/jobs/" + url.PathEscape(id) + "/logs"
	data, err := c.do(ctx, http.MethodGet, p, nil)
	if err != nil {
		return "", err
	}
	var out struct {
		Logs string `json:"logs"`
	}
	return out.Logs, decode(p, data, &out)
}
