package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// Name is the provider's name as pools write it.
const Name = "kubernetes"

// DefaultCleanupWait bounds how long Cleanup and Reclaim wait for the
// pods of the Jobs they deleted to be gone.
const DefaultCleanupWait = 60 * time.Second

// Info is what the provider registers with.
var Info = providers.Info{
	Name:         Name,
	Source:       providers.SourceBuiltIn,
	Summary:      "workers as Kubernetes Jobs (batch/v1), each with a Secret and a Lease, through client-go",
	Capabilities: providers.Capabilities{Render: true, DryRun: true, ClusterWrites: true},
	Creates:      "Jobs, Secrets and Leases in a Kubernetes cluster",
	Schema:       &Schema,
}

func init() {
	providers.Register(Info, func() providers.Provider { return New(Connect) })
}

var (
	_ providers.Provider       = (*Provider)(nil)
	_ providers.Renderer       = (*Provider)(nil)
	_ providers.DryRunner      = (*Provider)(nil)
	_ providers.LeftoverFinder = (*Provider)(nil)
	_ providers.LivenessMirror = (*Provider)(nil)
)

// imageFatal are the container waiting reasons that mean the pod will
// never get its image: the launch has failed, at once.
var imageFatal = map[string]bool{"ErrImageNeverPull": true, "InvalidImageName": true, "ErrImagePull": true}

// startFailed are the container waiting reasons of a container the
// runtime could not create or start; the kubelet tries again, so only a
// message that permanent recognises ends the launch at once.
var startFailed = map[string]bool{"CreateContainerError": true, "CreateContainerConfigError": true, "RunContainerError": true, "CrashLoopBackOff": true}

// permanentWords are what the container runtime says when a container
// can never start from its image, whatever the next launch does: its
// executable is not there, or is for another architecture.
var permanentWords = []string{"executable file not found", "no such file or directory", "exec format error", "permission denied"}

// permanent reports whether a container's waiting or terminated reason
// and message say it will never start: an image that cannot be had
// (never pulled, an invalid name, a pull the registry refused for good),
// or an executable the runtime cannot run.
func permanent(reason, message string) bool {
	m := strings.ToLower(message)
	switch reason {
	case "ErrImageNeverPull", "InvalidImageName":
		return true
	case "ErrImagePull", "ImagePullBackOff":
		return strings.Contains(m, "not found") || strings.Contains(m, "manifest unknown") || strings.Contains(m, "unauthorized")
	}
	for _, w := range permanentWords {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// advice says what to change for a container the runtime could not start,
// by the runtime's message: "" when it has nothing to add.
func advice(message string) string {
	m := strings.ToLower(message)
	switch {
	case strings.Contains(m, "executable file not found"), strings.Contains(m, "no such file or directory"):
		return " (the image holds no such executable: set command to the agent's path in the image, e.g. \"/wdc\", leave command out to run the image's own entrypoint, or set agent_image to bring the agent in an init container)"
	case strings.Contains(m, "exec format error"):
		return " (the executable is for another architecture or is no program: use an image built for the node's architecture)"
	}
	return ""
}

// logTailLines is how many of its last log lines a container that ended
// with an error has quoted in its end's reason.
const logTailLines = 5

// Provider launches workers as batch/v1 Jobs. Each launch creates a Secret
// (the launch credential), the Job (its pod runs `wdc agent`, reading the
// credential from the Secret) and a Lease (the worker's liveness, for
// `kubectl get leases`). It watches the Jobs and pods of each apply with
// informers (a list, then a watch, listed again when the watch expires),
// streams the agent's log into the launch's log file, and deletes what it
// created when a worker ends. IDs are "job:NAMESPACE/NAME". Safe for
// concurrent use.
type Provider struct {
	connect Connector

	mu       sync.Mutex
	clusters map[clusterKey]*cluster
	workers  map[string]*worker
}

// New returns a provider that makes its clients with connect (Connect,
// or a fake clientset's in tests). It connects to nothing until a launch.
func New(connect Connector) *Provider {
	return &Provider{connect: connect, clusters: map[clusterKey]*cluster{}, workers: map[string]*worker{}}
}

// Name returns "kubernetes".
func (p *Provider) Name() string { return Name }

// clusterKey names a cluster as a block selects it.
type clusterKey struct{ kubeconfig, context string }

// cluster is one API server's clients and the watches on it.
type cluster struct {
	*Clients
	watches map[watchKey]*watch
}

// worker is one launch, as the provider tracks it.
type worker struct {
	id, namespace, name string
	cl                  *cluster
	logPath             string

	end *providers.WorkerEnd

	// Guarded by Provider.mu.
	logging bool
	pod     string // the pod's name, once seen
	killing bool   // Stop(Kill) deleted the pod: its end is a kill
	holder  string // the Lease's holderIdentity, once set
	// ending: the end was seen and is being completed (its log's last
	// lines fetched); later observations are ignored.
	ending bool
	// waiting is the last waiting reason and message written to the
	// launch log, so each is written once.
	waiting string
}

// clusterFor returns the clients for a block, connecting the first time.
func (p *Provider) clusterFor(s *Settings) (*cluster, error) {
	k := clusterKey{s.Kubeconfig, s.Context}
	p.mu.Lock()
	cl := p.clusters[k]
	p.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	c, err := p.connect(s)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cl = p.clusters[k]; cl == nil {
		cl = &cluster{Clients: c, watches: map[watchKey]*watch{}}
		p.clusters[k] = cl
	}
	return cl, nil
}

// namespace resolves the block's namespace against the cluster's.
func namespace(s *Settings, cl *cluster) string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return cl.Namespace
}

// podRequest is req as the pod runs it: the agent agent_image brings, else
// the block's command, else the image's entrypoint (shown as
// imageEntrypoint); and the pod's work folder.
func podRequest(req providers.LaunchRequest, s *Settings) providers.LaunchRequest {
	req.Executable, req.WorkDir = cmp.Or(s.Command, imageEntrypoint), podWorkDir
	if s.AgentImage != "" {
		req.Executable = agentPath
	}
	return req
}

// Launch creates the launch's Secret, Lease and Job, in that order (the
// pod reads the Secret; the Lease is there before the worker registers),
// each with field manager "wdc". Creating is idempotent: an object that
// exists already is taken when it is this launch's (same labels and
// spec), and an error otherwise. On an error, what this call created is
// deleted again. The response's Argv is the pod's command.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) (providers.LaunchResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.LaunchResponse{}, err
	}
	cl, err := p.clusterFor(s)
	if err != nil {
		return providers.LaunchResponse{}, err
	}
	ns := namespace(s, cl)
	objs, err := Render(req, s, ns)
	if err != nil {
		return providers.LaunchResponse{}, err
	}
	id := "job:" + ns + "/" + objs.Job.Name
	w := &worker{id: id, namespace: ns, name: objs.Job.Name, cl: cl, logPath: req.LogPath, end: providers.NewWorkerEnd()}
	// Watch before creating, so no event of the Job is missed.
	if err := p.watch(cl, ns, req.Lineage, req.ApplyID); err != nil {
		return providers.LaunchResponse{}, err
	}
	p.mu.Lock()
	p.workers[id] = w
	p.mu.Unlock()

	var created []func(context.Context) error
	undo := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		for _, del := range slices.Backward(created) {
			del(cctx) //nolint:errcheck // best effort: Reclaim finds the rest by label
		}
		p.mu.Lock()
		delete(p.workers, id)
		p.mu.Unlock()
	}
	create := func(kind string, do func(context.Context) error, get func(context.Context) (metav1.Object, error), same func(metav1.Object) bool, del func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		err := do(cctx)
		if apierrors.IsAlreadyExists(err) {
			got, gerr := get(cctx)
			if gerr != nil {
				return fmt.Errorf("kubernetes: %s %s/%s exists and could not be read: %w", kind, ns, objs.Job.Name, gerr)
			}
			if !sameLaunch(got, objs.Job.Labels) || !same(got) {
				return fmt.Errorf("kubernetes: %s %s/%s exists and is not this launch's (labels %v)", kind, ns, objs.Job.Name, got.GetLabels())
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubernetes: creating %s %s/%s: %w", kind, ns, objs.Job.Name, err)
		}
		created = append(created, del)
		return nil
	}
	create0 := metav1.CreateOptions{FieldManager: fieldManager}
	secrets, leases, jobs := cl.Core.Secrets(ns), cl.Coordination.Leases(ns), cl.Batch.Jobs(ns)
	steps := []func() error{
		func() error {
			return create("Secret", func(c context.Context) error { _, err := secrets.Create(c, objs.Secret, create0); return err },
				func(c context.Context) (metav1.Object, error) {
					return secrets.Get(c, objs.Secret.Name, metav1.GetOptions{})
				},
				func(o metav1.Object) bool {
					return string(o.(*corev1.Secret).Data[credentialKey]) == req.Credential
				},
				func(c context.Context) error { return secrets.Delete(c, objs.Secret.Name, metav1.DeleteOptions{}) })
		},
		func() error {
			return create("Lease", func(c context.Context) error { _, err := leases.Create(c, objs.Lease, create0); return err },
				func(c context.Context) (metav1.Object, error) {
					return leases.Get(c, objs.Lease.Name, metav1.GetOptions{})
				},
				func(metav1.Object) bool { return true },
				func(c context.Context) error { return leases.Delete(c, objs.Lease.Name, metav1.DeleteOptions{}) })
		},
		func() error {
			return create("Job", func(c context.Context) error { _, err := jobs.Create(c, objs.Job, create0); return err },
				func(c context.Context) (metav1.Object, error) { return jobs.Get(c, objs.Job.Name, metav1.GetOptions{}) },
				func(o metav1.Object) bool {
					got := o.(*batchv1.Job).Spec.Template.Spec.Containers
					want := objs.Job.Spec.Template.Spec.Containers[0]
					return len(got) == 1 && got[0].Image == want.Image && slices.Equal(got[0].Args, want.Args)
				},
				func(c context.Context) error { return deleteJob(c, jobs, objs.Job.Name, nil) })
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			undo()
			return providers.LaunchResponse{}, err
		}
	}
	if req.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o700); err == nil {
			line := fmt.Sprintf("wdc: launched Job %s/%s on %s (pool %s, launch %d); the agent's output follows\n", ns, objs.Job.Name, cl.Server, req.Pool, req.Seq)
			os.WriteFile(req.LogPath, []byte(line), 0o600) //nolint:errcheck // the log is for people
		}
	}
	argv := providers.Render(podRequest(req, s))
	return providers.LaunchResponse{ID: id, Argv: argv, Host: cl.Server}, nil
}

// fieldManager is the field manager of every write.
const fieldManager = "wdc"

// sameLaunch reports whether an existing object carries the launch's
// identifying labels.
func sameLaunch(o metav1.Object, want map[string]string) bool {
	got := o.GetLabels()
	for _, k := range []string{LabelManagedBy, LabelLineage, LabelApplyID, LabelPool, LabelLaunchSeq} {
		if got[k] != want[k] {
			return false
		}
	}
	return true
}

// deleteJob deletes a Job with foreground propagation (batch/v1 would
// orphan its pods otherwise); grace, when not nil, is the grace period of
// the Job object's deletion. A Job that is gone already is not an error.
func deleteJob(ctx context.Context, jobs interface {
	Delete(context.Context, string, metav1.DeleteOptions) error
}, name string, grace *int64) error {
	fg := metav1.DeletePropagationForeground
	err := jobs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg, GracePeriodSeconds: grace})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// killJob deletes a Job of a dead apply and kills its pods: the Job with
// foreground propagation and a grace period of 0 (so its controller starts
// no new pod), then each of its pods with a grace period of 0. Its worker
// has nothing to drain to: the apply whose coordinator would take its
// results is gone, and its leases are revoked. Without the pods' own
// deletion the garbage collector would delete them with the pod's
// termination grace period (the drain timeout plus 15 s), and a worker
// busy with a task would keep its pod (and the next apply waiting for it)
// that long. Objects that are gone already are not an error.
func killJob(ctx context.Context, cl *cluster, ns, name string) error {
	zero := int64(0)
	if err := deleteJob(ctx, cl.Batch.Jobs(ns), name, &zero); err != nil {
		return fmt.Errorf("deleting Job %s/%s: %w", ns, name, err)
	}
	pods, err := cl.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + name})
	if err != nil {
		return fmt.Errorf("listing the pods of Job %s/%s: %w", ns, name, err)
	}
	var errs []error
	for _, pod := range pods.Items {
		err := cl.Core.Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", ns, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// lookup returns the worker an ID names. Errors: a malformed ID, or one
// this provider did not launch.
func (p *Provider) lookup(id string) (*worker, error) {
	rest, ok := strings.CutPrefix(id, "job:")
	ns, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || ns == "" || name == "" {
		return nil, fmt.Errorf("kubernetes: %q is not a worker id (job:NAMESPACE/NAME)", id)
	}
	p.mu.Lock()
	w := p.workers[id]
	p.mu.Unlock()
	if w == nil {
		return nil, fmt.Errorf("kubernetes: no worker %q was launched by this apply", id)
	}
	return w, nil
}

// Stop asks a worker to stop. A drain deletes its Job with foreground
// propagation: the pod gets SIGTERM and its termination grace period (the
// drain timeout plus 15 s) to drain. A kill deletes the pod with a grace
// period of 0 (the kubelet kills the container at once) and then the Job,
// and returns once the provider has seen the worker end or ctx is done.
func (p *Provider) Stop(ctx context.Context, req providers.StopRequest) error {
	w, err := p.lookup(req.ID)
	if err != nil {
		return err
	}
	p.mu.Lock()
	ended, pod := w.end.Ended(), w.pod
	if req.Kill && !ended {
		w.killing = true
	}
	p.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	jobs := w.cl.Batch.Jobs(w.namespace)
	if !req.Kill || ended {
		if err := deleteJob(cctx, jobs, w.name, nil); err != nil {
			return fmt.Errorf("kubernetes: deleting Job %s/%s: %w", w.namespace, w.name, err)
		}
		return nil
	}
	zero := int64(0)
	pods := []string{}
	if pod != "" {
		pods = append(pods, pod)
	} else if list, err := w.cl.Core.Pods(w.namespace).List(cctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + w.name}); err == nil {
		for _, it := range list.Items {
			pods = append(pods, it.Name)
		}
	}
	for _, name := range pods {
		if err := w.cl.Core.Pods(w.namespace).Delete(cctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes: deleting pod %s/%s: %w", w.namespace, name, err)
		}
	}
	if err := deleteJob(cctx, jobs, w.name, &zero); err != nil {
		return fmt.Errorf("kubernetes: deleting Job %s/%s: %w", w.namespace, w.name, err)
	}
	if _, err := w.end.Wait(ctx); err != nil {
		return err
	}
	return nil
}

// Status reports whether the worker's Job still runs (as its watch last
// saw it) and, once it ended, its container's exit code when known.
func (p *Provider) Status(ctx context.Context, req providers.StatusRequest) (providers.StatusResponse, error) {
	w, err := p.lookup(req.ID)
	if err != nil {
		return providers.StatusResponse{}, err
	}
	return w.end.Status(), nil
}

// Wait returns when the watch saw the worker end: its container
// terminated, its pod deleted or failed (evicted), its Job failed (its
// deadline, its backoff limit) or completed or deleted, or its image not
// to be had (ErrImageNeverPull, InvalidImageName, ErrImagePull: the
// provider then deletes the Job). Reason says which, with the cluster's
// own reason and message.
func (p *Provider) Wait(ctx context.Context, req providers.WaitRequest) (providers.WaitResponse, error) {
	w, err := p.lookup(req.ID)
	if err != nil {
		return providers.WaitResponse{}, err
	}
	return w.end.Wait(ctx)
}

// Cleanup deletes the worker's Job (foreground), Secret and Lease and
// waits, up to DefaultCleanupWait or ctx, until its pods are gone.
func (p *Provider) Cleanup(ctx context.Context, req providers.CleanupRequest) error {
	w, err := p.lookup(req.ID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultCleanupWait)
	defer cancel()
	var errs []error
	if err := deleteJob(ctx, w.cl.Batch.Jobs(w.namespace), w.name, nil); err != nil {
		errs = append(errs, fmt.Errorf("deleting Job %s/%s: %w", w.namespace, w.name, err))
	}
	if err := w.cl.Core.Secrets(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", w.namespace, w.name, err))
	}
	if err := w.cl.Coordination.Leases(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Lease %s/%s: %w", w.namespace, w.name, err))
	}
	if err := waitPodsGone(ctx, w.cl, w.namespace, jobNameLabel+"="+w.name); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubernetes: cleaning up after %s: %w", w.id, errors.Join(errs...))
	}
	return nil
}

// jobNameLabel is the label the Job controller puts on a Job's pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

// waitPodsGone polls, every 250 ms, until no pod matches selector in ns.
func waitPodsGone(ctx context.Context, cl *cluster, ns, selector string) error {
	for {
		list, err := cl.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			n := 0
			if list != nil {
				n = len(list.Items)
			}
			return fmt.Errorf("%d pods of %s in %s still there: %w", n, selector, ns, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// MirrorLiveness moves the worker's Lease: holderIdentity the worker id,
// acquireTime its first renewal, renewTime the heartbeat's time. Conflicts
// are retried (retry.RetryOnConflict). The Lease only shows who is alive:
// fencing tokens stay in wdc's state, and its resourceVersion is never one.
func (p *Provider) MirrorLiveness(ctx context.Context, req providers.LivenessRequest) error {
	w, err := p.lookup(req.ID)
	if err != nil {
		return err
	}
	leases := w.cl.Coordination.Leases(w.namespace)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		renew := metav1.NewMicroTime(req.Renewed)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != req.WorkerID {
			holder := req.WorkerID
			l.Spec.HolderIdentity, l.Spec.AcquireTime = &holder, &renew
		}
		l.Spec.RenewTime = &renew
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubernetes: renewing Lease %s/%s: %w", w.namespace, w.name, err)
	}
	p.mu.Lock()
	w.holder = req.WorkerID
	p.mu.Unlock()
	return nil
}

// finishLocked records a worker's end, once; an end other than exit
// status 0 is written to the launch log too.
func (p *Provider) finishLocked(w *worker, end providers.WaitResponse) {
	if w.killing && end.ExitCode == nil && end.Signal == "" {
		end.Signal = "SIGKILL"
	}
	if !w.end.Ended() && w.logPath != "" && (end.ExitCode == nil || *end.ExitCode != 0) {
		appendLog(w.logPath, "wdc: "+end.Reason+"\n")
	}
	w.end.Finish(end)
}

// observePod updates the worker of a pod from the pod's state (deleted
// when the watch reported it gone). The end of a container that ran and
// failed quotes the last lines of its log, fetched before the end is
// recorded; a container the runtime could not start quotes the runtime's
// reason and message, and is Permanent when they say no launch would do
// better (permanent).
func (p *Provider) observePod(pod *corev1.Pod, deleted bool) {
	job := ownerJob(pod)
	if job == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers["job:"+pod.Namespace+"/"+job]
	if w == nil || w.end.Ended() || w.ending {
		return
	}
	w.pod = pod.Name
	var agent *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			agent = &pod.Status.ContainerStatuses[i]
		}
	}
	if agent != nil && (agent.State.Running != nil || agent.State.Terminated != nil) && !w.logging && w.logPath != "" {
		w.logging = true
		go p.streamLog(w, pod.Name)
	}
	for i := range pod.Status.InitContainerStatuses {
		if ic := &pod.Status.InitContainerStatuses[i]; ic.Name == installContainerName && p.installFailedLocked(w, pod, ic) {
			return
		}
	}
	switch {
	case agent != nil && agent.State.Terminated != nil:
		t := agent.State.Terminated
		code := int(t.ExitCode)
		end := providers.WaitResponse{ExitCode: &code, Reason: fmt.Sprintf("pod %s: the agent exited with status %d", pod.Name, code)}
		if t.Reason != "" && t.Reason != "Completed" && t.Reason != "Error" {
			end.Reason += " (" + t.Reason + ")"
		}
		if t.Message != "" {
			end.Reason += ": " + oneLine(t.Message)
		}
		switch code {
		case 137:
			end.Signal = "SIGKILL"
		case 143:
			end.Signal = "SIGTERM"
		}
		if pod.Status.Reason != "" {
			end.Reason += "; pod " + pod.Status.Reason + ": " + pod.Status.Message
		}
		if t.Reason == "StartError" || t.Reason == "ContainerCannotRun" {
			end.Reason += advice(t.Message)
			end.Permanent = permanent(t.Reason, t.Message)
			p.finishLocked(w, end)
			return
		}
		if code == 0 || end.Signal != "" {
			p.finishLocked(w, end)
			return
		}
		w.ending = true
		go p.finishWithLog(w, pod.Name, containerName, end)
	case pod.Status.Phase == corev1.PodFailed:
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("pod %s failed: %s: %s", pod.Name, pod.Status.Reason, pod.Status.Message)})
	case deleted:
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("pod %s was deleted", pod.Name)})
	case agent != nil && agent.State.Waiting != nil && imageFatal[agent.State.Waiting.Reason]:
		wt := agent.State.Waiting
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("pod %s cannot get its image %q: %s: %s", pod.Name, agent.Image, wt.Reason, oneLine(wt.Message)),
			Permanent: permanent(wt.Reason, wt.Message)})
		p.deleteLater(w) // the pod would wait for its image forever
	case agent != nil && agent.State.Waiting != nil && startFailed[agent.State.Waiting.Reason]:
		wt := agent.State.Waiting
		why := fmt.Sprintf("pod %s: the container runtime cannot start the agent: %s: %s", pod.Name, wt.Reason, oneLine(wt.Message))
		if permanent(wt.Reason, wt.Message) {
			why += advice(wt.Message)
			p.finishLocked(w, providers.WaitResponse{Reason: why, Permanent: true})
			p.deleteLater(w) // the kubelet would try again forever
			return
		}
		if why != w.waiting && w.logPath != "" {
			w.waiting = why
			appendLog(w.logPath, "wdc: "+why+"\n")
		}
	}
}

// deleteLater deletes w's Job in the background (Cleanup tries again).
func (p *Provider) deleteLater(w *worker) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		deleteJob(ctx, w.cl.Batch.Jobs(w.namespace), w.name, nil) //nolint:errcheck // Cleanup tries again
	}()
}

// installFailedLocked ends w when the init container of agent_image (ic)
// shows that the agent will never be there: its image cannot be had, the
// runtime cannot start it, or it exited with an error (an image whose
// entrypoint is no wdc-agent). Such an end is Permanent, and the Job of a
// pod that would wait forever is deleted. It reports whether it ended w.
func (p *Provider) installFailedLocked(w *worker, pod *corev1.Pod, ic *corev1.ContainerStatus) bool {
	const change = " (agent_image must be an image whose entrypoint is wdc-agent or wdc, which `make image` writes; the init container runs it with install-agent)"
	what := fmt.Sprintf("pod %s: the init container from agent_image %q", pod.Name, ic.Image)
	switch {
	case ic.State.Terminated != nil && ic.State.Terminated.ExitCode != 0:
		t := ic.State.Terminated
		end := providers.WaitResponse{Permanent: true, Reason: fmt.Sprintf("%s could not install the agent: it exited with status %d", what, t.ExitCode)}
		if t.Reason != "" && t.Reason != "Error" {
			end.Reason += " (" + t.Reason + ")"
		}
		if t.Message != "" {
			end.Reason += ": " + oneLine(t.Message)
		}
		end.Reason += change
		// The pod failed (restartPolicy Never): nothing to delete before
		// its log is read; Cleanup deletes the Job.
		if t.Reason == "StartError" || t.Reason == "ContainerCannotRun" {
			p.finishLocked(w, end)
			return true
		}
		w.ending = true
		go p.finishWithLog(w, pod.Name, installContainerName, end)
		return true
	case ic.State.Waiting != nil && imageFatal[ic.State.Waiting.Reason]:
		wt := ic.State.Waiting
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("%s cannot get its image: %s: %s", what, wt.Reason, oneLine(wt.Message)),
			Permanent: permanent(wt.Reason, wt.Message)})
		p.deleteLater(w)
		return true
	case ic.State.Waiting != nil && startFailed[ic.State.Waiting.Reason] && permanent(ic.State.Waiting.Reason, ic.State.Waiting.Message):
		wt := ic.State.Waiting
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("%s cannot start: %s: %s%s", what, wt.Reason, oneLine(wt.Message), change), Permanent: true})
		p.deleteLater(w)
		return true
	}
	return false
}

// finishWithLog records end with the last lines of the container's log
// (logTailLines of them, at most 4 KiB) quoted, as far as the API server
// gives them within a few seconds.
func (p *Provider) finishWithLog(w *worker, pod, container string, end providers.WaitResponse) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lines, limit := int64(logTailLines), int64(4096)
	b, err := w.cl.Core.Pods(w.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &lines, LimitBytes: &limit}).DoRaw(ctx)
	if err == nil {
		end = withLogTail(end, string(b))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked(w, end)
}

// withLogTail is end with the last lines of the container's log quoted.
// runc reports an executable it could start but the kernel could not run
// (one for another architecture) in the container's own output, as "exec
// PATH: exec format error" with status 1: such a line makes the end
// Permanent, with what to change.
func withLogTail(end providers.WaitResponse, tail string) providers.WaitResponse {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return end
	}
	end.Reason += "; the last lines of its log: " + oneLine(tail)
	for _, line := range strings.Split(tail, "\n") {
		if strings.HasPrefix(line, "exec ") && permanent("", line) {
			end.Permanent = true
			end.Reason += advice(line)
			break
		}
	}
	return end
}

// oneLine joins the lines of s with " | ", for a message on one line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(strings.TrimSpace(s), func(r rune) bool { return r == '\n' || r == '\r' }), " | ")
}

// appendLog appends a line to a launch's log file (best effort: the log
// is for people).
func appendLog(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	f.WriteString(line) //nolint:errcheck // best effort
	f.Close()
}

// observeJob updates the worker of a Job from the Job's state.
func (p *Provider) observeJob(job *batchv1.Job, deleted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers["job:"+job.Namespace+"/"+job.Name]
	if w == nil || w.end.Ended() || w.ending {
		return
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed:
			p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("Job %s failed: %s: %s", job.Name, c.Reason, c.Message)})
			return
		case batchv1.JobComplete:
			zero := 0
			p.finishLocked(w, providers.WaitResponse{ExitCode: &zero, Reason: fmt.Sprintf("Job %s completed", job.Name)})
			return
		}
	}
	if deleted {
		p.finishLocked(w, providers.WaitResponse{Reason: fmt.Sprintf("Job %s was deleted", job.Name)})
	}
}

// ownerJob returns the name of the Job that controls pod, or "".
func ownerJob(pod *corev1.Pod) string {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return pod.Labels[jobNameLabel]
}

// streamLog copies the agent container's log into the launch's log file
// until the container's log ends.
func (p *Provider) streamLog(w *worker, pod string) {
	f, err := os.OpenFile(w.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	// The container may have ended already: its log is still there until
	// the pod goes. Retry briefly while the kubelet starts serving it.
	for range 20 {
		rc, err := w.cl.Core.Pods(w.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: containerName, Follow: true}).Stream(context.Background())
		if err == nil {
			_, _ = io.Copy(f, rc)
			rc.Close()
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Reclaim deletes the Jobs (foreground, their pods killed: killJob),
// Secrets and Leases of the dead applies (req.ApplyIDs, and the apply ids
// of req.Launches) of the state's lineage, in the namespaces of
// req.Settings' blocks and of the launch records, found by their labels,
// and waits, bounded, until their pods are gone. Launch records whose Job it found are Stopped, the others Gone;
// OrphanWorkers counts the Jobs of launches without a record.
func (p *Provider) Reclaim(ctx context.Context, req providers.ReclaimRequest) (providers.ReclaimResponse, error) {
	var resp providers.ReclaimResponse
	found, err := p.find(ctx, req)
	if err != nil {
		return resp, err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultCleanupWait)
	defer cancel()
	var errs []error
	stopped := map[string]bool{}
	for _, f := range found {
		switch f.kind {
		case "Job":
			stopped[f.namespace+"/"+f.name] = true
			if err := killJob(ctx, f.cl, f.namespace, f.name); err != nil {
				errs = append(errs, err)
			}
		case "Secret":
			if err := f.cl.Core.Secrets(f.namespace).Delete(ctx, f.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		case "Lease":
			if err := f.cl.Coordination.Leases(f.namespace).Delete(ctx, f.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		if f.kind == "Job" && f.record == nil {
			resp.OrphanWorkers++ // a worker whose launch the state no longer had open
		}
	}
	for _, f := range found {
		if f.kind == "Job" {
			if err := waitPodsGone(ctx, f.cl, f.namespace, jobNameLabel+"="+f.name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, l := range req.Launches {
		if stopped[strings.TrimPrefix(l.ID, "job:")] {
			resp.Stopped = append(resp.Stopped, l)
		} else {
			resp.Gone = append(resp.Gone, l)
		}
	}
	if len(errs) > 0 {
		return resp, fmt.Errorf("kubernetes: deleting what a dead apply left: %w", errors.Join(errs...))
	}
	return resp, nil
}

// FindLeftovers lists what Reclaim would delete, deleting nothing.
func (p *Provider) FindLeftovers(ctx context.Context, req providers.ReclaimRequest) (providers.LeftoversResponse, error) {
	found, err := p.find(ctx, req)
	if err != nil {
		return providers.LeftoversResponse{}, err
	}
	var out providers.LeftoversResponse
	for _, f := range found {
		what := fmt.Sprintf("%s %s/%s of apply %s (pool %s, launch %s) on %s", f.kind, f.namespace, f.name, f.labels[LabelApplyID], f.labels[LabelPool], f.labels[LabelLaunchSeq], f.cl.Server)
		stop := fmt.Sprintf("kubectl delete %s -n %s %s", strings.ToLower(f.kind), f.namespace, f.name)
		if f.kind == "Job" {
			stop += " --cascade=foreground"
		}
		out.Leftovers = append(out.Leftovers, providers.Leftover{Launch: f.record, What: what, Stop: stop})
	}
	return out, nil
}

// found is one object of a dead apply.
type found struct {
	kind, namespace, name string
	labels                map[string]string
	cl                    *cluster
	record                *providers.LaunchRecord
}

// find lists the Jobs, Secrets and Leases of the lineage whose apply id is
// one of the dead applies', in every namespace the settings and records
// name.
func (p *Provider) find(ctx context.Context, req providers.ReclaimRequest) ([]found, error) {
	if req.Lineage == "" {
		return nil, nil // without the lineage nothing is known to be this state's
	}
	dead := map[string]bool{}
	for _, id := range req.ApplyIDs {
		dead[labelValue(id)] = true
	}
	records := map[string]*providers.LaunchRecord{}
	for i, l := range req.Launches {
		dead[labelValue(l.ApplyID)] = true
		records[strings.TrimPrefix(l.ID, "job:")] = &req.Launches[i]
	}
	if len(dead) == 0 {
		return nil, nil
	}
	if len(req.Settings) == 0 && len(req.Launches) > 0 {
		// The state recorded launches of a pool the configuration no
		// longer has: look where kubectl would, in the recorded
		// namespaces, rather than take them for gone.
		req.Settings = []wdchcl.ProviderSettings{&Settings{}}
	}
	type place struct {
		cl *cluster
		ns string
	}
	var places []place
	seen := map[place]bool{}
	for _, v := range req.Settings {
		s, err := settings(v)
		if err != nil {
			return nil, err
		}
		cl, err := p.clusterFor(s)
		if err != nil {
			return nil, err
		}
		nss := []string{namespace(s, cl)}
		for key := range records {
			if ns, _, ok := strings.Cut(key, "/"); ok {
				nss = append(nss, ns)
			}
		}
		for _, ns := range nss {
			if pl := (place{cl, ns}); !seen[pl] {
				seen[pl] = true
				places = append(places, pl)
			}
		}
	}
	selector := labels.SelectorFromSet(SelectorLabels(req.Lineage, "", "")).String()
	opts := metav1.ListOptions{LabelSelector: selector}
	var out []found
	add := func(kind string, cl *cluster, o metav1.Object) {
		if !dead[o.GetLabels()[LabelApplyID]] {
			return
		}
		out = append(out, found{kind: kind, namespace: o.GetNamespace(), name: o.GetName(), labels: maps.Clone(o.GetLabels()), cl: cl,
			record: records[o.GetNamespace()+"/"+o.GetName()]})
	}
	for _, pl := range places {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		jobs, err := pl.cl.Batch.Jobs(pl.ns).List(cctx, opts)
		if err == nil {
			for i := range jobs.Items {
				add("Job", pl.cl, &jobs.Items[i])
			}
			var secrets *corev1.SecretList
			if secrets, err = pl.cl.Core.Secrets(pl.ns).List(cctx, opts); err == nil {
				for i := range secrets.Items {
					add("Secret", pl.cl, &secrets.Items[i])
				}
				var leases *coordinationv1.LeaseList
				if leases, err = pl.cl.Coordination.Leases(pl.ns).List(cctx, opts); err == nil {
					for i := range leases.Items {
						add("Lease", pl.cl, &leases.Items[i])
					}
				}
			}
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: listing wdc's objects in namespace %s on %s: %w", pl.ns, pl.cl.Server, err)
		}
	}
	return out, nil
}

// Close stops the provider's watches. Workers keep running.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cl := range p.clusters {
		for k, w := range cl.watches {
			w.stop()
			delete(cl.watches, k)
		}
	}
	return nil
}

// RenderLaunch returns the Secret (its data shown as "(sensitive)"), the
// Lease and the Job a launch would create, as YAML, in the order Launch
// creates them; it connects to nothing but reads the kubeconfig for the
// namespace when the block names none.
func (p *Provider) RenderLaunch(ctx context.Context, req providers.LaunchRequest) (providers.RenderResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.RenderResponse{}, err
	}
	ns := s.Namespace
	if ns == "" {
		if cl, err := p.clusterFor(s); err == nil {
			ns = cl.Namespace
		} else {
			ns = "default"
		}
	}
	objs, err := Render(req, s, ns)
	if err != nil {
		return providers.RenderResponse{}, err
	}
	docs, err := objs.YAML()
	if err != nil {
		return providers.RenderResponse{}, err
	}
	env := []string{protocol.LaunchCredentialEnv}
	for k := range req.Env {
		env = append(env, k)
	}
	slices.Sort(env)
	resp := providers.RenderResponse{Argv: providers.Render(podRequest(req, s)), Env: env}
	for i, kind := range []string{"Secret", "Lease", "Job"} {
		resp.Objects = append(resp.Objects, providers.RenderedObject{Kind: kind, Name: objs.Job.Name, Body: docs[i]})
	}
	return resp, nil
}

// DryRunLaunch submits the launch's Secret, Lease, Job and the Job's pod
// template as a Pod (quota and admission act on pods, not Jobs) with
// server-side dry run (DryRunAll): the API server runs validation,
// admission and quota and persists nothing. The error is the API server's
// own, naming the object it refused.
func (p *Provider) DryRunLaunch(ctx context.Context, req providers.LaunchRequest) (providers.DryRunResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.DryRunResponse{}, err
	}
	cl, err := p.clusterFor(s)
	if errors.Is(err, errNoConfiguration) {
		return providers.DryRunResponse{}, fmt.Errorf("%w: %v", providers.ErrUnreachable, err)
	}
	if err != nil {
		return providers.DryRunResponse{}, err // a context or file the block names that is not right
	}
	ns := namespace(s, cl)
	if req.Credential == "" {
		req.Credential = "dry-run"
	}
	objs, err := Render(req, s, ns)
	if err != nil {
		return providers.DryRunResponse{}, err
	}
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: fieldManager}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *objs.Job.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *objs.Job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace = objs.Job.Name, ns
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for _, c := range []struct {
		kind   string
		create func() error
	}{
		{"Secret", func() error { _, err := cl.Core.Secrets(ns).Create(ctx, objs.Secret, opts); return err }},
		{"Lease", func() error { _, err := cl.Coordination.Leases(ns).Create(ctx, objs.Lease, opts); return err }},
		{"Job", func() error { _, err := cl.Batch.Jobs(ns).Create(ctx, objs.Job, opts); return err }},
		{"Job's pod", func() error { _, err := cl.Core.Pods(ns).Create(ctx, pod, opts); return err }},
	} {
		err := c.create()
		var status apierrors.APIStatus
		switch {
		case err == nil:
		case !errors.As(err, &status):
			return providers.DryRunResponse{}, fmt.Errorf("%w: %s on %s: %v", providers.ErrUnreachable, c.kind, cl.Server, err)
		default:
			// The first refusal says it; the objects after it would
			// mostly repeat it (a namespace that does not exist).
			return providers.DryRunResponse{}, fmt.Errorf("the API server refused the %s %s/%s: %w", c.kind, ns, objs.Job.Name, err)
		}
	}
	return providers.DryRunResponse{}, nil
}
