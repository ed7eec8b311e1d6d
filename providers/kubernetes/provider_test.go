package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// The fake clientset neither validates nor runs anything (and a dry run
// writes there): these tests check what the provider sends and how it
// reads what it watches. The end-to-end tests run against a real API
// server and kubelet (testdata/k8s-scripts/*.txtar).

func block() *Settings {
	return &Settings{Namespace: "jobs", Image: "local/wdc:1", ImagePullPolicy: "Never", Command: "/wdc",
		Requests: Resources{CPU: "250m", Memory: "64Mi"}, Limits: Resources{CPU: "250m", Memory: "64Mi"},
		Labels: map[string]string{"team": "data"}, Annotations: map[string]string{"note": "x"},
		HostNetwork: true, ActiveDeadline: time.Hour, TTLAfterFinished: 10 * time.Minute, AllowWrites: true}
}

func request(t *testing.T, seq int) providers.LaunchRequest {
	return providers.LaunchRequest{Pool: "builders", Lineage: "lin-1", ApplyID: "apply-1", Seq: seq,
		ServerURL: "https://127.0.0.1:9", CASHA256: "ab12", Credential: "wdcl_secret-credential",
		WorkDir: t.TempDir(), LogPath: filepath.Join(t.TempDir(), "builders-1.log"), Executable: "/wdc",
		DrainTimeout: 10 * time.Second, HeartbeatTTL: 8 * time.Second, Settings: block()}
}

func fakeProvider(t *testing.T, objects ...any) (*Provider, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *batchv1.Job:
			_, err = cs.BatchV1().Jobs(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *coordinationv1.Lease:
			_, err = cs.CoordinationV1().Leases(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p := New(func(*Settings) (*Clients, error) {
		return &Clients{Batch: cs.BatchV1(), Core: cs.CoreV1(), Coordination: cs.CoordinationV1(), Namespace: "default", Server: "https://fake", NoWatchList: true}, nil
	})
	t.Cleanup(func() { p.Close() })
	return p, cs
}

func TestObjectName(t *testing.T) {
	long := strings.Repeat("very-long-pool-name-", 6)
	tests := []struct {
		pool   string
		prefix string
	}{
		{"builders", "wdc-builders-1-"},
		{"Build_Pool", "wdc-build-pool-1-"},
		{long, "wdc-very-long-pool-name-very-long"},
		{"___", "wdc-1-"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		name := ObjectName("lin", "apply", tt.pool, 1)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("ObjectName(%q) = %q: %v", tt.pool, name, errs)
		}
		if !strings.HasPrefix(name, tt.prefix) {
			t.Errorf("ObjectName(%q) = %q, want prefix %q", tt.pool, name, tt.prefix)
		}
		seen[name] = true
	}
	// Unique per (lineage, apply id, pool, sequence), even where the pool
	// name was cut.
	for _, n := range []string{ObjectName("lin", "apply", long, 2), ObjectName("lin", "apply2", long, 1),
		ObjectName("lin2", "apply", long, 1), ObjectName("lin", "apply", long+"x", 1)} {
		if seen[n] {
			t.Errorf("%q is not unique", n)
		}
		seen[n] = true
	}
}

// TestRenderContainers: what the pod runs, by the block's command.
func TestRenderContainers(t *testing.T) {
	tests := []struct {
		name     string
		change   func(*Settings)
		command  []string // the agent container's
		argv0    string   // of the argv wdc shows
		initArgs []string // the init container's; nil: none
	}{
		{name: "command set", change: func(*Settings) {}, command: []string{"/wdc"}, argv0: "/wdc"},
		{name: "the image's entrypoint", change: func(s *Settings) { s.Command = "" }, command: nil, argv0: imageEntrypoint},
		{name: "agent_image", change: func(s *Settings) { s.Command, s.Image, s.AgentImage = "", "local/busybox:1", "local/wdc-agent:1" },
			command: []string{agentPath}, argv0: agentPath, initArgs: []string{"install-agent", agentPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := block()
			tt.change(s)
			req := request(t, 1)
			req.Settings = s
			objs, err := Render(req, s, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			spec := objs.Job.Spec.Template.Spec
			c := spec.Containers[0]
			if !slices.Equal(c.Command, tt.command) {
				t.Errorf("command %q, want %q", c.Command, tt.command)
			}
			if len(c.Args) == 0 || c.Args[0] != "agent" {
				t.Errorf("args %q, want agent …", c.Args)
			}
			if argv := providers.Render(podRequest(req, s)); argv[0] != tt.argv0 || !slices.Equal(argv[1:], c.Args) {
				t.Errorf("shown argv %q, want %s and the container's args %q", argv, tt.argv0, c.Args)
			}
			var initArgs []string
			for _, ic := range spec.InitContainers {
				initArgs = append(initArgs, ic.Args...)
			}
			if !slices.Equal(initArgs, tt.initArgs) {
				t.Errorf("init containers' args %q, want %q", initArgs, tt.initArgs)
			}
			if s.AgentImage == "" {
				return
			}
			ic := spec.InitContainers[0]
			if ic.Image != s.AgentImage || ic.Command != nil || c.Image != s.Image {
				t.Errorf("init container %s %q, agent container %s: want the agent image's entrypoint, then the task image", ic.Image, ic.Command, c.Image)
			}
			mounted := func(c corev1.Container) (corev1.VolumeMount, bool) {
				for _, m := range c.VolumeMounts {
					if m.MountPath == agentDir {
						return m, true
					}
				}
				return corev1.VolumeMount{}, false
			}
			im, ok1 := mounted(ic)
			am, ok2 := mounted(c)
			if !ok1 || !ok2 || im.Name != am.Name || im.ReadOnly || !am.ReadOnly {
				t.Errorf("the agent's folder: init %+v, agent %+v; want one volume, written by the init container, read-only for the agent", im, am)
			}
		})
	}
}

// TestWithLogTail: the last lines of a failed container's log are quoted,
// and runc's own line about an executable the kernel cannot run makes the
// end Permanent.
func TestWithLogTail(t *testing.T) {
	tests := []struct {
		tail      string
		reason    string
		permanent bool
	}{
		{"", "exited", false},
		{"panic: boom\ngoroutine 1", "exited; the last lines of its log: panic: boom | goroutine 1", false},
		{"exec /wdc-agent: exec format error\n", "exited; the last lines of its log: exec /wdc-agent: exec format error (the executable is for another architecture", true},
		{"level=ERROR msg=\"task failed: exec format error\"", "exited; the last lines of its log: level=ERROR", false},
	}
	for _, tt := range tests {
		got := withLogTail(providers.WaitResponse{Reason: "exited"}, tt.tail)
		if !strings.HasPrefix(got.Reason, tt.reason) || got.Permanent != tt.permanent {
			t.Errorf("withLogTail(%q) = %q, permanent %v; want %q…, %v", tt.tail, got.Reason, got.Permanent, tt.reason, tt.permanent)
		}
	}
}

func TestLabelValue(t *testing.T) {
	for _, in := range []string{"ok", "a/b", strings.Repeat("x", 80), "-lead", "___", "0193b0c4-7a1e-7c3f-9d2e-5b8f1a2c3d4e"} {
		got := labelValue(in)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", in, got, errs)
		}
		if len(validation.IsValidLabelValue(in)) == 0 && got != in {
			t.Errorf("labelValue(%q) = %q, want it unchanged", in, got)
		}
	}
	if labelValue("a/b") == labelValue("a:b") {
		t.Errorf("two values that had to change share a label value")
	}
}

func TestRender(t *testing.T) {
	req := request(t, 3)
	objs, err := Render(req, block(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	job := objs.Job
	spec := job.Spec
	checks := []struct {
		what string
		ok   bool
	}{
		{"parallelism 1", *spec.Parallelism == 1},
		{"completions 1", *spec.Completions == 1},
		{"backoffLimit 0", *spec.BackoffLimit == 0},
		{"activeDeadlineSeconds 3600", *spec.ActiveDeadlineSeconds == 3600},
		{"ttlSecondsAfterFinished 600", *spec.TTLSecondsAfterFinished == 600},
		{"restartPolicy Never", spec.Template.Spec.RestartPolicy == corev1.RestartPolicyNever},
		{"grace = drain + 15s", *spec.Template.Spec.TerminationGracePeriodSeconds == 25},
		{"host network with its DNS policy", spec.Template.Spec.HostNetwork && spec.Template.Spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet},
		{"namespace", job.Namespace == "jobs" && objs.Secret.Namespace == "jobs" && objs.Lease.Namespace == "jobs"},
		{"managed-by label", job.Labels[LabelManagedBy] == "wdc" && spec.Template.Labels[LabelManagedBy] == "wdc"},
		{"launch labels", job.Labels[LabelPool] == "builders" && job.Labels[LabelApplyID] == "apply-1" && job.Labels[LabelLaunchSeq] == "3" && job.Labels[LabelLineage] == "lin-1"},
		{"extra labels and annotations", job.Labels["team"] == "data" && job.Annotations["note"] == "x"},
		{"lease duration = ttl", *objs.Lease.Spec.LeaseDurationSeconds == 8 && objs.Lease.Spec.HolderIdentity == nil},
		{"secret holds the credential", string(objs.Secret.Data[credentialKey]) == req.Credential},
		{"one name for all three", objs.Secret.Name == job.Name && objs.Lease.Name == job.Name},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("rendered Job: want %s", c.what)
		}
	}
	c := spec.Template.Spec.Containers[0]
	if want := []string{"/wdc"}; c.Command[0] != want[0] || c.Image != "local/wdc:1" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("container %s %q %s", c.Image, c.Command, c.ImagePullPolicy)
	}
	if got := strings.Join(c.Args, " "); !strings.Contains(got, "agent --server https://127.0.0.1:9 --pool builders --work-dir /wdc-work --ca-sha256 ab12") {
		t.Errorf("args %q", got)
	}
	if c.Resources.Requests.Cpu().String() != "250m" || c.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("resources %v", c.Resources)
	}
	var ref *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == protocol.LaunchCredentialEnv {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Name != job.Name || ref.Key != credentialKey {
		t.Errorf("credential env %+v, want a secretKeyRef to the launch's Secret", c.Env)
	}
	for _, o := range []any{job, objs.Lease} {
		b, _ := yaml.Marshal(o)
		if strings.Contains(string(b), req.Credential) {
			t.Errorf("the credential is in %T:\n%s", o, b)
		}
	}
	docs, err := objs.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(docs, ""), req.Credential) || !strings.Contains(docs[0], "(sensitive)") {
		t.Errorf("rendered YAML shows the credential or no redaction:\n%s", docs[0])
	}

	bad := block()
	bad.Labels = map[string]string{"bad key!": "v"}
	if _, err := Render(req, bad, "jobs"); err == nil {
		t.Errorf("Render with an invalid label key: no error")
	}
}

func TestLaunchCreatesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	p, cs := fakeProvider(t)
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName(req.Lineage, req.ApplyID, req.Pool, req.Seq)
	if resp.ID != "job:jobs/"+name || resp.Host != "https://fake" {
		t.Errorf("response %+v", resp)
	}
	for _, get := range []func() error{
		func() error { _, err := cs.CoreV1().Secrets("jobs").Get(ctx, name, metav1.GetOptions{}); return err },
		func() error {
			_, err := cs.CoordinationV1().Leases("jobs").Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error { _, err := cs.BatchV1().Jobs("jobs").Get(ctx, name, metav1.GetOptions{}); return err },
	} {
		if err := get(); err != nil {
			t.Errorf("after Launch: %v", err)
		}
	}
	// The same launch again (a retried call) takes what exists.
	p2, _ := fakeProvider(t)
	p2.connect = p.connect
	if _, err := p2.Launch(ctx, req); err != nil {
		t.Errorf("Launch of a launch that exists: %v", err)
	}
	// Another credential under the same name is not this launch's.
	other := req
	other.Credential = "wdcl_another"
	p3, _ := fakeProvider(t)
	p3.connect = p.connect
	if _, err := p3.Launch(ctx, other); err == nil || !strings.Contains(err.Error(), "not this launch's") {
		t.Errorf("Launch over another launch's Secret = %v, want an error", err)
	}
}

func TestLaunchUndoesWhatItCreated(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	name := ObjectName(req.Lineage, req.ApplyID, req.Pool, req.Seq)
	// A Job of that name that is not this launch's makes the launch fail
	// after the Secret and the Lease were created: both go again.
	p, cs := fakeProvider(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs"}})
	if _, err := p.Launch(ctx, req); err == nil {
		t.Fatal("Launch over a foreign Job: no error")
	}
	if _, err := cs.CoreV1().Secrets("jobs").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret of the failed launch: %v, want it deleted", err)
	}
	if _, err := cs.CoordinationV1().Leases("jobs").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease of the failed launch: %v, want it deleted", err)
	}
	if _, err := cs.BatchV1().Jobs("jobs").Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the foreign Job: %v, want it left alone", err)
	}
}

// pod returns a pod of the launch's Job, as the Job controller makes it.
func pod(objs *Objects, status corev1.PodStatus) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: objs.Job.Name + "-abcde", Namespace: objs.Job.Namespace, Labels: objs.Job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: objs.Job.Name, UID: "u", Controller: &yes}}},
		Spec:   objs.Job.Spec.Template.Spec,
		Status: status,
	}
}

func agentStatus(state corev1.ContainerState) corev1.PodStatus {
	return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, Image: "local/wdc:1", State: state}}}
}

func TestWaitReportsTheEnd(t *testing.T) {
	tests := []struct {
		name string
		// act changes the cluster as the kubelet or the Job controller
		// would.
		act        func(ctx context.Context, cs *fake.Clientset, objs *Objects) error
		reason     []string
		exitCode   int // -1: none
		jobDeleted bool
		permanent  bool
	}{
		{
			name: "the agent exits with a code",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, agentStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}})), metav1.CreateOptions{})
				return err
			},
			reason: []string{"exited with status 3", "the last lines of its log: fake logs"}, exitCode: 3,
		},
		{
			name: "the runtime cannot find the executable",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, agentStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError",
					Message: `failed to create containerd task: exec: "wdc": executable file not found in $PATH: unknown`}})), metav1.CreateOptions{})
				return err
			},
			reason: []string{"exited with status 128 (StartError)", `exec: "wdc": executable file not found in $PATH`}, exitCode: 128, permanent: true,
		},
		{
			name: "the runtime cannot create the container, for good",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, agentStatus(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "RunContainerError", Message: "exec format error"}})), metav1.CreateOptions{})
				return err
			},
			reason: []string{"cannot start the agent: RunContainerError: exec format error"}, exitCode: -1, jobDeleted: true, permanent: true,
		},
		{
			name: "the image cannot be had",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, agentStatus(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ErrImageNeverPull", Message: `Container image "local/wdc:1" is not present with pull policy of Never`}})), metav1.CreateOptions{})
				return err
			},
			reason: []string{"ErrImageNeverPull", `"local/wdc:1"`, "is not present"}, exitCode: -1, jobDeleted: true, permanent: true,
		},
		{
			name: "agent_image holds no agent",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				st := corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: installContainerName, Image: "local/busybox:1",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "Error"}}}}}
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, st), metav1.CreateOptions{})
				return err
			},
			reason: []string{`the init container from agent_image "local/busybox:1" could not install the agent: it exited with status 127`,
				"fake logs", "entrypoint is wdc-agent or wdc"}, exitCode: -1, permanent: true,
		},
		{
			name: "the pod is evicted",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				st := corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}
				_, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, st), metav1.CreateOptions{})
				return err
			},
			reason: []string{"Evicted", "low on resource"}, exitCode: -1,
		},
		{
			name: "the pod is deleted",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				pd := pod(objs, agentStatus(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}))
				if _, err := cs.CoreV1().Pods("jobs").Create(ctx, pd, metav1.CreateOptions{}); err != nil {
					return err
				}
				time.Sleep(100 * time.Millisecond)
				return cs.CoreV1().Pods("jobs").Delete(ctx, pd.Name, metav1.DeleteOptions{})
			},
			reason: []string{"was deleted"}, exitCode: -1,
		},
		{
			name: "the Job hits its deadline",
			act: func(ctx context.Context, cs *fake.Clientset, objs *Objects) error {
				j := objs.Job.DeepCopy()
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}
				_, err := cs.BatchV1().Jobs("jobs").UpdateStatus(ctx, j, metav1.UpdateOptions{})
				return err
			},
			reason: []string{"DeadlineExceeded", "longer than specified deadline"}, exitCode: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := request(t, 1)
			p, cs := fakeProvider(t)
			resp, err := p.Launch(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
			if _, err := p.Wait(short, providers.WaitRequest{ID: resp.ID}); err == nil {
				t.Errorf("Wait returned while the worker runs")
			}
			stop()
			objs, _ := Render(req, block(), "jobs")
			if err := tt.act(ctx, cs, objs); err != nil {
				t.Fatal(err)
			}
			end, err := p.Wait(ctx, providers.WaitRequest{ID: resp.ID})
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			for _, want := range tt.reason {
				if !strings.Contains(end.Reason, want) {
					t.Errorf("reason %q, want it to say %q", end.Reason, want)
				}
			}
			if end.Permanent != tt.permanent {
				t.Errorf("Permanent = %v, want %v", end.Permanent, tt.permanent)
			}
			switch {
			case tt.exitCode < 0 && end.ExitCode != nil:
				t.Errorf("exit code %d, want none", *end.ExitCode)
			case tt.exitCode >= 0 && (end.ExitCode == nil || *end.ExitCode != tt.exitCode):
				t.Errorf("exit code %v, want %d", end.ExitCode, tt.exitCode)
			}
			st, err := p.Status(ctx, providers.StatusRequest{ID: resp.ID})
			if err != nil || st.Running {
				t.Errorf("Status after the end = %+v, %v", st, err)
			}
			if tt.jobDeleted {
				deadline := time.Now().Add(5 * time.Second)
				for {
					_, err := cs.BatchV1().Jobs("jobs").Get(ctx, objs.Job.Name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the Job of a pod without its image is still there: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

func TestStreamsTheAgentLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := request(t, 1)
	p, cs := fakeProvider(t)
	if _, err := p.Launch(ctx, req); err != nil {
		t.Fatal(err)
	}
	objs, _ := Render(req, block(), "jobs")
	if _, err := cs.CoreV1().Pods("jobs").Create(ctx, pod(objs, agentStatus(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		b, _ := os.ReadFile(req.LogPath)
		// The fake clientset's log of every container is "fake logs".
		if strings.HasPrefix(string(b), "wdc: launched Job jobs/"+objs.Job.Name) && strings.Contains(string(b), "fake logs") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("worker log %q, want the launch line and the container's log", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCleanupDeletesEverything(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	p, cs := fakeProvider(t)
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := cs.BatchV1().Jobs("jobs").List(ctx, metav1.ListOptions{})
	secrets, _ := cs.CoreV1().Secrets("jobs").List(ctx, metav1.ListOptions{})
	leases, _ := cs.CoordinationV1().Leases("jobs").List(ctx, metav1.ListOptions{})
	if len(jobs.Items)+len(secrets.Items)+len(leases.Items) != 0 {
		t.Errorf("after Cleanup: %d Jobs, %d Secrets, %d Leases", len(jobs.Items), len(secrets.Items), len(leases.Items))
	}
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Errorf("a second Cleanup: %v", err)
	}
}

func TestReclaimDeletesOnlyWhatDeadAppliesLabelled(t *testing.T) {
	ctx := context.Background()
	objects := func(lineage, applyID string, seq int) []any {
		req := request(t, seq)
		req.Lineage, req.ApplyID = lineage, applyID
		o, err := Render(req, block(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return []any{o.Job, o.Secret, o.Lease}
	}
	var all []any
	all = append(all, objects("lin-1", "dead-1", 1)...)
	all = append(all, objects("lin-1", "dead-2", 1)...)
	all = append(all, objects("lin-1", "alive", 1)...)
	all = append(all, objects("other-state", "dead-1", 1)...)
	p, cs := fakeProvider(t, all...)
	record := providers.LaunchRecord{ApplyID: "dead-1", Pool: "builders", Seq: 1, ID: "job:jobs/" + ObjectName("lin-1", "dead-1", "builders", 1)}
	req := providers.ReclaimRequest{Lineage: "lin-1", ApplyIDs: []string{"dead-1", "dead-2"}, Launches: []providers.LaunchRecord{record},
		Settings: []wdchcl.ProviderSettings{block()}}

	left, err := p.FindLeftovers(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Leftovers) != 6 {
		t.Errorf("FindLeftovers found %d objects, want 6 (3 of each dead apply): %+v", len(left.Leftovers), left.Leftovers)
	}
	for _, l := range left.Leftovers {
		if !strings.Contains(l.Stop, "kubectl delete") {
			t.Errorf("leftover %q: stop %q", l.What, l.Stop)
		}
	}
	if jobs, _ := cs.BatchV1().Jobs("jobs").List(ctx, metav1.ListOptions{}); len(jobs.Items) != 4 {
		t.Fatalf("FindLeftovers deleted something: %d Jobs left of 4", len(jobs.Items))
	}

	resp, err := p.Reclaim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Stopped) != 1 || resp.Stopped[0].ID != record.ID {
		t.Errorf("Stopped %+v, want the recorded launch", resp.Stopped)
	}
	jobs, _ := cs.BatchV1().Jobs("jobs").List(ctx, metav1.ListOptions{})
	var kept []string
	for _, j := range jobs.Items {
		kept = append(kept, j.Labels[LabelLineage]+"/"+j.Labels[LabelApplyID])
	}
	if strings.Join(kept, ",") != "lin-1/alive,other-state/dead-1" && strings.Join(kept, ",") != "other-state/dead-1,lin-1/alive" {
		t.Errorf("Jobs left after Reclaim: %v, want the live apply's and the other state's", kept)
	}
	for _, list := range []func() int{
		func() int { l, _ := cs.CoreV1().Secrets("jobs").List(ctx, metav1.ListOptions{}); return len(l.Items) },
		func() int {
			l, _ := cs.CoordinationV1().Leases("jobs").List(ctx, metav1.ListOptions{})
			return len(l.Items)
		},
	} {
		if n := list(); n != 2 {
			t.Errorf("%d Secrets or Leases left, want 2", n)
		}
	}
	// Without the lineage nothing is known to be this state's.
	if resp, err := p.Reclaim(ctx, providers.ReclaimRequest{ApplyIDs: []string{"alive"}, Settings: []wdchcl.ProviderSettings{block()}}); err != nil || len(resp.Stopped) != 0 {
		t.Errorf("Reclaim without a lineage = %+v, %v", resp, err)
	}
}

// A dead apply's worker has nothing to drain to: Reclaim kills its pods
// (grace period 0) instead of leaving them to the garbage collector, which
// would give each its termination grace period (the drain timeout + 15 s,
// longer than Reclaim waits) while its task runs on. Found by
// testdata/k8s-scripts/k8s_sigkill_reapply.txtar.
func TestReclaimKillsTheDeadAppliesPods(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	req.ApplyID = "dead-1"
	o, err := Render(req, block(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	p, cs := fakeProvider(t, o.Job, o.Secret, o.Lease)
	running := pod(o, agentStatus(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}))
	running.Labels = map[string]string{jobNameLabel: o.Job.Name}
	if _, err := cs.CoreV1().Pods("jobs").Create(ctx, running, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	if _, err := p.Reclaim(ctx, providers.ReclaimRequest{Lineage: "lin-1", ApplyIDs: []string{"dead-1"}, Settings: []wdchcl.ProviderSettings{block()}}); err != nil {
		t.Fatal(err)
	}
	var podDeleted, jobDeleted bool
	for _, a := range cs.Actions() {
		d, ok := a.(k8stesting.DeleteAction)
		if !ok {
			continue
		}
		opts := d.GetDeleteOptions()
		switch d.GetResource().Resource {
		case "pods":
			podDeleted = d.GetName() == running.Name
			if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
				t.Errorf("pod %s deleted with grace period %v, want 0", d.GetName(), opts.GracePeriodSeconds)
			}
		case "jobs":
			jobDeleted = d.GetName() == o.Job.Name
			if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground {
				t.Errorf("Job deleted with propagation %v, want Foreground", opts.PropagationPolicy)
			}
		}
	}
	if !podDeleted || !jobDeleted {
		t.Errorf("Reclaim deleted the pod: %v, the Job: %v; want both", podDeleted, jobDeleted)
	}
	if pods, _ := cs.CoreV1().Pods("jobs").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d pods left after Reclaim", len(pods.Items))
	}
}

func TestMirrorLiveness(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	p, cs := fakeProvider(t)
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{first, first.Add(2 * time.Second)} {
		if err := p.MirrorLiveness(ctx, providers.LivenessRequest{ID: resp.ID, WorkerID: "w-1", Renewed: at}); err != nil {
			t.Fatal(err)
		}
		l, err := cs.CoordinationV1().Leases("jobs").Get(ctx, ObjectName(req.Lineage, req.ApplyID, req.Pool, 1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "w-1" || !l.Spec.RenewTime.Time.Equal(at) || !l.Spec.AcquireTime.Time.Equal(first) {
			t.Errorf("renewal %d: lease spec %+v", i, l.Spec)
		}
		if *l.Spec.LeaseDurationSeconds != 8 {
			t.Errorf("lease duration %d, want the heartbeat ttl", *l.Spec.LeaseDurationSeconds)
		}
	}
}

func TestBadIDs(t *testing.T) {
	p, _ := fakeProvider(t)
	for _, id := range []string{"", "job:", "job:ns", "job:/name", "pid:1", "job:ns/unknown"} {
		if _, err := p.Status(context.Background(), providers.StatusRequest{ID: id}); err == nil {
			t.Errorf("Status(%q): no error", id)
		}
	}
	if _, err := p.Launch(context.Background(), providers.LaunchRequest{Pool: "x"}); err == nil || !strings.Contains(err.Error(), "no kubernetes block") {
		t.Errorf("Launch without settings = %v", err)
	}
}

// Launches the state recorded for a pool the configuration no longer has
// are still looked for (where kubectl would look), not taken for gone.
func TestReclaimWithoutSettingsUsesTheRecords(t *testing.T) {
	ctx := context.Background()
	req := request(t, 1)
	req.ApplyID = "dead-1"
	o, err := Render(req, block(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	p, cs := fakeProvider(t, o.Job, o.Secret, o.Lease)
	record := providers.LaunchRecord{ApplyID: "dead-1", Pool: "builders", Seq: 1, ID: "job:jobs/" + o.Job.Name}
	resp, err := p.Reclaim(ctx, providers.ReclaimRequest{Lineage: req.Lineage, Launches: []providers.LaunchRecord{record}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Stopped) != 1 || len(resp.Gone) != 0 || resp.OrphanWorkers != 0 {
		t.Errorf("Reclaim = %+v, want the recorded launch stopped", resp)
	}
	if jobs, _ := cs.BatchV1().Jobs("jobs").List(ctx, metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("%d Jobs left", len(jobs.Items))
	}
}

// No client configuration at all is "unreachable" (plan warns); a
// context the block names that the kubeconfig lacks is an error.
func TestConnectErrors(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		block       Settings
		noConfig    bool
		wantErrText string
	}{
		{"a kubeconfig that does not exist", Settings{Kubeconfig: filepath.Join(dir, "missing")}, true, "missing"},
		{"an unknown context", Settings{Kubeconfig: kubeconfig, Context: "nosuch"}, false, "nosuch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Connect(&tt.block)
			if err == nil || !strings.Contains(err.Error(), tt.wantErrText) {
				t.Fatalf("Connect = %v, want an error naming %q", err, tt.wantErrText)
			}
			if got := errors.Is(err, errNoConfiguration); got != tt.noConfig {
				t.Errorf("errors.Is(err, errNoConfiguration) = %v, want %v (%v)", got, tt.noConfig, err)
			}
		})
	}
	if _, err := Connect(&Settings{Kubeconfig: kubeconfig}); err != nil {
		t.Errorf("Connect with a good kubeconfig: %v", err)
	}
}
