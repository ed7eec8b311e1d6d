package ray

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

var fastBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}

func TestClientAnswers(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	c := f.client()
	c.Backoff = fastBackoff

	v, err := c.Version(ctx)
	if err != nil || v.RayVersion != "2.60.0" {
		t.Fatalf("Version = %+v, %v", v, err)
	}
	sub := JobSubmission{Entrypoint: "echo hi", SubmissionID: "wdc-a-1-x", Metadata: map[string]string{"k": "v"}}
	id, err := c.Submit(ctx, sub)
	if err != nil || id != "wdc-a-1-x" {
		t.Fatalf("Submit = %q, %v", id, err)
	}

	tests := []struct {
		name string
		call func() error
		want error  // errors.Is
		text string // in the message
	}{
		{"duplicate submission id", func() error { _, err := c.Submit(ctx, sub); return err }, ErrAlreadyExists, "already exists"},
		{"get unknown job", func() error { _, err := c.Job(ctx, "nope"); return err }, ErrNotFound, "Job nope does not exist"},
		{"stop unknown job", func() error { _, err := c.Stop(ctx, "nope"); return err }, ErrNotFound, "does not exist"},
		{"logs of unknown job", func() error { _, err := c.Logs(ctx, "nope"); return err }, ErrNotFound, "does not exist"},
		{"delete a pending job", func() error { _, err := c.Delete(ctx, id); return err }, nil, "non-terminal state PENDING"},
		{"unknown field", func() error {
			_, err := c.do(ctx, http.MethodPost, "/api/jobs/", map[string]any{"entrypoint": "x", "bogus": 1})
			return err
		}, nil, "400 Bad Request: Traceback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			var he *HTTPError
			if tt.want == nil && !errors.As(err, &he) {
				t.Errorf("error %T %v, want an *HTTPError", err, err)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not say %q", err, tt.text)
			}
		})
	}

	f.log(id, "line 1\n")
	if logs, err := c.Logs(ctx, id); err != nil || logs != "line 1\n" {
		t.Errorf("Logs = %q, %v", logs, err)
	}
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 2 || jobs[0].Type != "DRIVER" || jobs[1].SubmissionID != id {
		t.Errorf("Jobs = %+v, %v; want the DRIVER job and ours", jobs, err)
	}
	if stopped, err := c.Stop(ctx, id); err != nil || !stopped {
		t.Errorf("Stop = %v, %v", stopped, err)
	}
	if stopped, err := c.Stop(ctx, id); err != nil || stopped {
		t.Errorf("Stop of a stopped job = %v, %v; want false", stopped, err)
	}
	if deleted, err := c.Delete(ctx, id); err != nil || !deleted {
		t.Errorf("Delete = %v, %v", deleted, err)
	}
}

func TestClientRetriesUnavailableAndLostAnswers(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	c := f.client()
	c.Backoff = fastBackoff

	f.unavailable = 2
	if id, err := c.Submit(ctx, JobSubmission{Entrypoint: "x", SubmissionID: "a"}); err != nil || id != "a" {
		t.Fatalf("Submit after 2 unavailable answers = %q, %v", id, err)
	}
	if n := f.count("POST /api/jobs/"); n != 3 {
		t.Errorf("%d submissions, want 3", n)
	}

	f.unavailable = 10
	_, err := c.Submit(ctx, JobSubmission{Entrypoint: "x", SubmissionID: "b"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "gave up after 4 tries") {
		t.Errorf("Submit with no agent = %v, want ErrUnavailable after 4 tries", err)
	}

	// The job is made but its answer is lost: the retry is told it
	// exists already.
	f.unavailable, f.loseAnswers = 0, 1
	_, err = c.Submit(ctx, JobSubmission{Entrypoint: "x", SubmissionID: "c"})
	if !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("Submit whose answer was lost = %v, want ErrAlreadyExists from the retry", err)
	}
}

func TestClientToken(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	f.token = "s3cret"
	c := f.client()
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("Version with the token: %v", err)
	}
	c.Token = "wrong"
	_, err := c.Version(ctx)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "401") {
		t.Errorf("Version with a wrong token = %v, want ErrUnauthorized", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	c := &Client{Address: "http://127.0.0.1:1"}
	_, err := c.Version(context.Background())
	var te *TransportError
	if !errors.As(err, &te) {
		t.Errorf("Version of a closed port = %T %v, want a *TransportError", err, err)
	}
}

// FuzzClassify: any status and body give an error or nil, never a panic,
// and decoding any body into the client's answer types fails cleanly.
func FuzzClassify(f *testing.F) {
	f.Add(500, []byte("ValueError: Job with submission_id x already exists. Please use a different submission_id."))
	f.Add(500, []byte("No available agent to submit job, please try again later."))
	f.Add(404, []byte("Job x does not exist"))
	f.Add(200, []byte(`{"submission_id":"x","status":"RUNNING","driver_exit_code":null,"metadata":{"a":"b"},"job_id":null}`))
	f.Add(200, []byte(`[{"type":"DRIVER","job_id":"01000000"}]`))
	f.Add(200, []byte(`{"logs":"a\nb"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		err := classify(http.MethodPost, "/api/jobs/", status, body)
		if status >= 200 && status < 300 && err != nil {
			t.Errorf("classify(%d) = %v, want nil", status, err)
		}
		if (status < 200 || status >= 300) && err == nil {
			t.Errorf("classify(%d) = nil, want an error", status)
		}
		var j JobDetails
		_ = decode("/api/jobs/x", body, &j)
		var js []JobDetails
		_ = decode("/api/jobs/", body, &js)
		var v Version
		_ = decode("/api/version", body, &v)
	})
}
