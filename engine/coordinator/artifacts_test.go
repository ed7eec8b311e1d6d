package coordinator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func blobHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestResultWaitsForItsArtifacts: a result naming blobs the coordinator
// lacks is answered 409 missing_artifacts listing them and is not a
// decision; only those may be uploaded (a stranger's blob is not
// expected; a mismatching body is refused and stores nothing); once they
// are held the same result is accepted and binds them; a blob the
// coordinator holds (the empty one from the start) is never asked for.
func TestResultWaitsForItsArtifacts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	a := w.claimOne()
	stdout, stderr := []byte("hello\n"), []byte{}
	arts := []protocol.ArtifactRef{
		{Kind: protocol.ArtifactLog, Name: "stdout", SHA256: blobHash(stdout), Size: int64(len(stdout)), MediaType: "text/plain"},
		{Kind: protocol.ArtifactLog, Name: "stderr", SHA256: blobHash(stderr), Size: 0},
	}
	zero := 0
	req := protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: "k", ExitCode: &zero,
		DefHash: a.DefHash, Artifacts: arts}
	_, err := w.cl.PostResult(ctx, a.FencingToken, req)
	var ae *protocol.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != protocol.CodeMissingArtifacts ||
		len(ae.Missing) != 1 || ae.Missing[0] != blobHash(stdout) {
		t.Fatalf("first post: %v; want 409 missing_artifacts naming the stdout only (the empty blob is held from the start)", err)
	}
	if got := h.task("task.a"); got.Status != state.TaskRunning {
		t.Errorf("task.a is %s while its result waits; want running", got.Status)
	}
	if rs, _ := h.store.Results(ctx, "task.a"); len(rs) != 0 {
		t.Errorf("a result waiting for its artifacts was recorded: %+v", rs)
	}
	other := []byte("not asked for")
	if _, err := w.cl.PutArtifact(ctx, blobHash(other), bytes.NewReader(other), int64(len(other))); protocol.StatusOf(err) != 409 {
		t.Errorf("upload of a blob no result waits for: %v; want 409 not_expected", err)
	}
	if _, err := w.cl.PutArtifact(ctx, blobHash(stdout), strings.NewReader("tampered\n"), 9); protocol.StatusOf(err) != 400 {
		t.Errorf("upload with the wrong content: %v; want 400 hash_mismatch", err)
	}
	if _, ok, _ := h.blobs.Stat(blobHash(stdout)); ok {
		t.Errorf("a mismatching upload was stored")
	}
	if resp, err := w.cl.PutArtifact(ctx, blobHash(stdout), bytes.NewReader(stdout), int64(len(stdout))); err != nil || !resp.Created || resp.Size != int64(len(stdout)) {
		t.Fatalf("upload = %+v, %v", resp, err)
	}
	resp, err := w.cl.PostResult(ctx, a.FencingToken, req)
	if err != nil || resp.Decision != "accepted" || resp.Duplicate {
		t.Fatalf("post after the uploads = %+v, %v", resp, err)
	}
	got, _ := h.store.ArtifactsOf(ctx, "task.a", 1)
	if len(got) != 2 {
		t.Errorf("artifacts bound: %+v", got)
	}
	// The next result names the same (empty) stderr: not asked again.
	b := w.claimOne()
	req2 := protocol.ResultRequest{WorkerID: w.id, Task: b.Task, Attempt: b.Attempt, IdempotencyKey: "k2", ExitCode: &zero,
		Artifacts: arts[1:]}
	if resp, err := w.cl.PostResult(ctx, b.FencingToken, req2); err != nil || resp.Decision != "accepted" {
		t.Errorf("a result naming only held blobs = %+v, %v; want accepted at once", resp, err)
	}
}

// TestSiblingResultsUploadTogether: a worker of capacity 2 uploads the
// blobs of two results at once; the first one decided does not take from
// the other its right to upload what it was answered missing.
func TestSiblingResultsUploadTogether(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	asgs := w.claim(2)
	if len(asgs) != 2 {
		t.Fatalf("claimed %d, want 2", len(asgs))
	}
	zero := 0
	post := func(a protocol.Assignment, out []byte) error {
		arts := []protocol.ArtifactRef{{Kind: protocol.ArtifactLog, Name: "stdout", SHA256: blobHash(out), Size: int64(len(out)), MediaType: "text/plain"}}
		_, err := w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
			IdempotencyKey: "k-" + a.Task, ExitCode: &zero, DefHash: a.DefHash, Artifacts: arts})
		return err
	}
	outA, outB := []byte("a says hello\n"), []byte("b says hello\n")
	for _, c := range []struct {
		a   protocol.Assignment
		out []byte
	}{{asgs[0], outA}, {asgs[1], outB}} {
		if err := post(c.a, c.out); protocol.StatusOf(err) != 409 {
			t.Fatalf("first post of %s: %v; want 409 missing_artifacts", c.a.Task, err)
		}
	}
	if _, err := w.cl.PutArtifact(ctx, blobHash(outB), bytes.NewReader(outB), int64(len(outB))); err != nil {
		t.Fatal(err)
	}
	if err := post(asgs[1], outB); err != nil {
		t.Fatalf("second result after its upload: %v", err)
	}
	// The first result's upload is still expected.
	if _, err := w.cl.PutArtifact(ctx, blobHash(outA), bytes.NewReader(outA), int64(len(outA))); err != nil {
		t.Fatalf("the first result's upload after its sibling was accepted: %v; want it still expected", err)
	}
	if err := post(asgs[0], outA); err != nil {
		t.Fatalf("first result after its upload: %v", err)
	}
}

// TestFencedResultNeverAsksForArtifacts: a result of a lease that is no
// longer current is rejected at once, without asking for (or ingesting)
// its artifacts; the rejection records the hashes it named.
func TestFencedResultNeverAsksForArtifacts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 1, 3, time.Millisecond)}, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	a := w.claimOne()
	h.clock.Advance(time.Minute)
	h.sweep() // the lease expires; the attempt is lost
	zero := 0
	blob := []byte("late output")
	resp, err := w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, IdempotencyKey: "k", ExitCode: &zero,
		Artifacts: []protocol.ArtifactRef{{Kind: protocol.ArtifactLog, Name: "stdout", SHA256: blobHash(blob), Size: int64(len(blob))}}})
	if err != nil || resp.Decision != "rejected" || resp.Reason != "lease_expired" {
		t.Fatalf("late result = %+v, %v; want rejected lease_expired at once", resp, err)
	}
	rs, _ := h.store.Results(ctx, "task.a")
	if len(rs) != 1 || !strings.Contains(string(rs[0].Body), blobHash(blob)) {
		t.Errorf("the rejection does not record the hash it named: %+v", rs)
	}
}

// TestFailureCarriesStderrTail: a failed attempt's retried or failed event
// carries the last StderrTailLines lines of its stderr, redacted.
func TestFailureCarriesStderrTail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")},
		harnessOpts{redact: func(s string) string { return strings.ReplaceAll(s, "hunter2", "(sensitive)") }})
	ctx := context.Background()
	w := h.register("p")
	a := w.claimOne()
	var lines []string
	for i := range 30 {
		lines = append(lines, "line "+strings.Repeat("x", i%3)+" hunter2")
	}
	stderr := []byte(strings.Join(lines, "\n") + "\n")
	ref := protocol.ArtifactRef{Kind: protocol.ArtifactLog, Name: "stderr", SHA256: blobHash(stderr), Size: int64(len(stderr))}
	if _, err := h.blobs.Put(ctx, ref.SHA256, bytes.NewReader(stderr)); err != nil {
		t.Fatal(err)
	}
	one := 1
	if _, err := w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, IdempotencyKey: "k", ExitCode: &one,
		FailureClass: "failure", Error: "exit status 1", Artifacts: []protocol.ArtifactRef{ref}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range h.recorded() {
		if e.Kind == coordinator.EventFailed && e.Task == "task.a" {
			got := strings.Split(e.StderrTail, "\n")
			if len(got) != coordinator.StderrTailLines || got[len(got)-1] != "line xx (sensitive)" || strings.Contains(e.StderrTail, "hunter2") {
				t.Errorf("stderr tail %q; want the last %d lines, redacted", e.StderrTail, coordinator.StderrTailLines)
			}
			return
		}
	}
	t.Errorf("no failed event")
}

// TestGCKeepsWhatIsReferredToOrInFlight: beside a running coordinator,
// garbage collection keeps the blobs accepted attempts bound and those a
// result in flight has uploaded but not yet posted again, and removes a
// blob nothing refers to; a dry run removes nothing; only the operator
// credential opens the route.
func TestGCKeepsWhatIsReferredToOrInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	w := h.register("p")
	zero := 0
	post := func(a protocol.Assignment, key string, blob []byte) (protocol.ResultResponse, error) {
		return w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: key,
			ExitCode: &zero, DefHash: a.DefHash, Artifacts: []protocol.ArtifactRef{{Kind: protocol.ArtifactLog, Name: "stdout", SHA256: blobHash(blob), Size: int64(len(blob))}}})
	}
	upload := func(blob []byte) {
		t.Helper()
		if _, err := w.cl.PutArtifact(ctx, blobHash(blob), bytes.NewReader(blob), int64(len(blob))); err != nil {
			t.Fatal(err)
		}
	}
	accepted, inFlight, orphan := []byte("accepted\n"), []byte("in flight\n"), []byte("nobody's\n")
	a := w.claimOne()
	if _, err := post(a, "ka", accepted); protocol.StatusOf(err) != 409 {
		t.Fatalf("first post: %v", err)
	}
	upload(accepted)
	if r, err := post(a, "ka", accepted); err != nil || r.Decision != "accepted" {
		t.Fatalf("post = %+v, %v", r, err)
	}
	b := w.claimOne()
	if _, err := post(b, "kb", inFlight); protocol.StatusOf(err) != 409 {
		t.Fatalf("first post of b: %v", err)
	}
	upload(inFlight)
	if _, err := h.blobs.Put(ctx, blobHash(orphan), bytes.NewReader(orphan)); err != nil {
		t.Fatal(err)
	}

	want := []protocol.GCBlob{{SHA256: blobHash(orphan), Size: int64(len(orphan))}}
	dry, err := ops.GC(ctx, protocol.GCRequest{DryRun: true})
	if err != nil || !dry.DryRun || len(dry.Removed) != 1 || dry.Removed[0] != want[0] || dry.Kept != 2 || dry.RemovedBytes != int64(len(orphan)) {
		t.Fatalf("dry run = %+v, %v; want the orphan listed, 2 kept", dry, err)
	}
	if _, ok, _ := h.blobs.Stat(blobHash(orphan)); !ok {
		t.Fatalf("a dry run removed a blob")
	}
	if _, err := w.cl.GC(ctx, protocol.GCRequest{}); protocol.StatusOf(err) != 401 {
		t.Errorf("gc with a session: %v; want 401", err)
	}
	res, err := ops.GC(ctx, protocol.GCRequest{})
	if err != nil || res.DryRun || len(res.Removed) != 1 || res.Removed[0] != want[0] || res.Kept != 2 || res.KeptBytes != int64(len(accepted)+len(inFlight)) {
		t.Fatalf("gc = %+v, %v", res, err)
	}
	for blob, held := range map[string]bool{string(accepted): true, string(inFlight): true, string(orphan): false} {
		if _, ok, _ := h.blobs.Stat(blobHash([]byte(blob))); ok != held {
			t.Errorf("after gc, blob %q held = %t, want %t", blob, ok, held)
		}
	}
	// The result in flight lands without another upload.
	if r, err := post(b, "kb", inFlight); err != nil || r.Decision != "accepted" {
		t.Errorf("post of b after gc = %+v, %v", r, err)
	}
}

// TestResultOutputsMatchTheDeclaredOnes: a result of the current lease may
// name only outputs its task declares, and one that succeeds must name an
// output for each declared pattern; either mistake is a 400 that decides
// nothing, and the right result is then accepted.
func TestResultOutputsMatchTheDeclaredOnes(t *testing.T) {
	t.Parallel()
	task := rtTask("a")
	task.Definition.Outputs = []string{"out/*.json", "report.html"}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{task}, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	a := w.claimOne()
	blob := []byte("{}")
	ref := func(name string) protocol.ArtifactRef {
		return protocol.ArtifactRef{Kind: protocol.ArtifactOutput, Name: name, SHA256: blobHash(blob), Size: int64(len(blob))}
	}
	zero, one := 0, 1
	post := func(key string, exit *int, class string, refs ...protocol.ArtifactRef) (protocol.ResultResponse, error) {
		return w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
			IdempotencyKey: key, ExitCode: exit, FailureClass: class, DefHash: a.DefHash, Artifacts: refs})
	}
	for _, tc := range []struct {
		name  string
		exit  *int
		class string
		refs  []protocol.ArtifactRef
		want  string
	}{
		{"undeclared output", &zero, "", []protocol.ArtifactRef{ref("out/r.json"), ref("report.html"), ref("nope.txt")}, `output "nope.txt" matches none`},
		{"a declared pattern without output", &zero, "", []protocol.ArtifactRef{ref("out/r.json")}, `names no output matching the declared "report.html"`},
		{"a failure naming an undeclared output", &one, "failure", []protocol.ArtifactRef{ref("x.bin")}, `output "x.bin" matches none`},
	} {
		_, err := post("k-"+tc.name, tc.exit, tc.class, tc.refs...)
		var ae *protocol.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: %v; want 400 saying %q", tc.name, err, tc.want)
		}
	}
	if got := h.task("task.a"); got.Status != state.TaskRunning {
		t.Errorf("task.a is %s after refused results; want running", got.Status)
	}
	// A failure may leave declared outputs out.
	if _, err := post("k-fail", &one, "failure"); err != nil {
		t.Errorf("a failure without outputs: %v", err)
	}
}

// TestResultRefusesBadArtifactNames: an output whose name could leave the
// attempt's directory ("out/.." matches the declared "out/*") is refused
// with a typed 400, over HTTP and through the coordinator's own API,
// before anything is decided or bound; the task's right result is then
// accepted.
func TestResultRefusesBadArtifactNames(t *testing.T) {
	t.Parallel()
	task := rtTask("a")
	task.Definition.Outputs = []string{"out/*"}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{task}, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	a := w.claimOne()
	blob := []byte("x")
	if _, err := h.blobs.Put(ctx, blobHash(blob), bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	zero := 0
	req := func(key, name string) protocol.ResultRequest {
		return protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: key, ExitCode: &zero,
			Artifacts: []protocol.ArtifactRef{{Kind: protocol.ArtifactOutput, Name: name, SHA256: blobHash(blob), Size: 1}}}
	}
	for i, name := range []string{"out/..", "out/.", "out//x", "out/", "/out/x", `out/a\b`, "out/a\x00"} {
		key := fmt.Sprintf("k%d", i)
		_, err := w.cl.PostResult(ctx, a.FencingToken, req(key, name))
		if ae := (*protocol.APIError)(nil); !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "bad_request" || !strings.Contains(ae.Message, "output") {
			t.Errorf("POST with output %q: %v; want a 400 bad_request naming the output", name, err)
		}
		_, err = h.c.Result(ctx, w.api(), a.FencingToken, req(key, name), nil)
		if ce := (*coordinator.Error)(nil); !errors.As(err, &ce) || ce.Code != coordinator.CodeBadRequest {
			t.Errorf("Result with output %q: %v; want a CodeBadRequest refusal", name, err)
		}
	}
	if got, _ := h.store.ArtifactsOf(ctx, "task.a", 1); len(got) != 0 {
		t.Errorf("artifacts bound by refused results: %+v", got)
	}
	if got := h.task("task.a"); got.Status != state.TaskRunning {
		t.Errorf("task.a is %s after refused results; want running", got.Status)
	}
	if r, err := w.cl.PostResult(ctx, a.FencingToken, req("ok", "out/r.txt")); err != nil || r.Decision != "accepted" {
		t.Errorf("the right result = %+v, %v; want accepted", r, err)
	}
}

// TestFencingComesBeforeOutputs: a late result (another worker's lease, a
// stale token, an ended lease, a token no lease has) that names outputs,
// declared ones or not, gets its fenced rejection (docs/design.md §3 rule
// 3), not a 400 about its outputs, and changes nothing; the holder's
// result is then accepted.
func TestFencingComesBeforeOutputs(t *testing.T) {
	t.Parallel()
	task := withRetry(rtTask("a"), 1, 3, time.Millisecond)
	task.Definition.Outputs = []string{"out/*"}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{task}, harnessOpts{})
	ctx := context.Background()
	w1, w2 := h.register("p"), h.register("p")
	blob := []byte("x")
	if _, err := h.blobs.Put(ctx, blobHash(blob), bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	zero := 0
	post := func(w *worker, token int64, key string, names ...string) (protocol.ResultResponse, error) {
		var refs []protocol.ArtifactRef
		for _, n := range names {
			refs = append(refs, protocol.ArtifactRef{Kind: protocol.ArtifactOutput, Name: n, SHA256: blobHash(blob), Size: 1})
		}
		return w.cl.PostResult(ctx, token, protocol.ResultRequest{WorkerID: w.id, IdempotencyKey: key, ExitCode: &zero, Artifacts: refs})
	}
	expect := func(what string, resp protocol.ResultResponse, err error, reason string) {
		t.Helper()
		if err != nil || resp.Decision != "rejected" || resp.Reason != reason {
			t.Errorf("%s = %+v, %v; want rejected %s", what, resp, err, reason)
		}
	}
	old := w1.claimOne()
	h.clock.Advance(time.Minute)
	h.sweep() // lost: retried at once
	w1.heartbeat()
	w2.heartbeat()
	cur := w2.claimOne()
	for _, names := range [][]string{{"out/r.txt"}, {"undeclared.bin"}, nil} {
		r, err := post(w1, old.FencingToken, fmt.Sprintf("stale-%d", len(names)), names...)
		expect(fmt.Sprintf("stale token with outputs %q", names), r, err, "stale_token")
		r, err = post(w1, cur.FencingToken, fmt.Sprintf("thief-%d", len(names)), names...)
		expect(fmt.Sprintf("another worker's lease with outputs %q", names), r, err, "wrong_worker")
		r, err = post(w1, 999, fmt.Sprintf("none-%d", len(names)), names...)
		expect(fmt.Sprintf("unknown token with outputs %q", names), r, err, "unknown_lease")
	}
	if got := h.task("task.a"); got.Status != state.TaskRunning {
		t.Errorf("task.a is %s after fenced results; want running", got.Status)
	}
	if r, err := post(w2, cur.FencingToken, "real", "out/r.txt"); err != nil || r.Decision != "accepted" {
		t.Fatalf("the holder's result = %+v, %v; want accepted", r, err)
	}
	// The lease has ended: a later post naming outputs is fenced too.
	r, err := post(w2, cur.FencingToken, "again", "out/r.txt")
	expect("a post of an ended lease", r, err, "lease_expired")
	if got, _ := h.store.ArtifactsOf(ctx, "task.a", cur.Attempt); len(got) != 1 || got[0].Name != "out/r.txt" {
		t.Errorf("artifacts of the accepted attempt: %+v", got)
	}
	// Through the Go API as well.
	r, err = h.c.Result(ctx, w1.api(), old.FencingToken, protocol.ResultRequest{WorkerID: w1.id, IdempotencyKey: "api", ExitCode: &zero,
		Artifacts: []protocol.ArtifactRef{{Kind: protocol.ArtifactOutput, Name: "undeclared.bin", SHA256: blobHash(blob), Size: 1}}}, nil)
	expect("Result of a stale token", r, err, "stale_token")
}
