package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// Labels wdc puts on every object it creates, so it finds them again (at
// the end of an apply, and after an apply died) and nothing else.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by" // "wdc"
	LabelPool      = "wdc.dev/pool"
	LabelLineage   = "wdc.dev/lineage"
	LabelApplyID   = "wdc.dev/apply-id"
	LabelLaunchSeq = "wdc.dev/launch-seq"
	managedBy      = "wdc"
)

// Where things are inside the worker's pod.
const (
	// credentialKey is the Secret key holding the launch credential.
	credentialKey = "credential"
	// podWorkDir is the agent's work folder in the pod (an emptyDir).
	podWorkDir = "/wdc-work"
	// containerName is the agent's container.
	containerName = "agent"
	// agentDir is where, with agent_image, the init container puts the
	// agent binary (an emptyDir beside the work folder, so only / is
	// above the work folder still) and agentPath the binary.
	agentDir  = "/wdc-agent-bin"
	agentPath = agentDir + "/wdc-agent"
	// installContainerName is the init container of agent_image.
	installContainerName = "install-agent"
	// imageEntrypoint stands for the image's own ENTRYPOINT in the argv
	// wdc shows: without command the pod sets only the arguments.
	imageEntrypoint = "<image entrypoint>"
)

// Objects are what one launch creates: the Secret holding the launch
// credential, the Job running the agent (its pod reads the credential from
// the Secret, never from its own spec), and the Lease that mirrors the
// worker's liveness.
type Objects struct {
	Secret *corev1.Secret
	Job    *batchv1.Job
	Lease  *coordinationv1.Lease
}

// ObjectName returns the name of a launch's Job, Secret and Lease: a
// DNS-1123 label of at most 63 characters, "wdc-<pool>-<seq>-<hash>", where
// hash is the first 10 hex digits of the SHA-256 of lineage, apply id, pool
// and sequence, so the name is unique per launch; a long pool name is cut
// to fit (the hash keeps it unique). Kubernetes copies a Job's name into its
// pods' label batch.kubernetes.io/job-name, whose values are at most 63
// characters too.
func ObjectName(lineage, applyID, pool string, seq int) string {
	sum := sha256.Sum256([]byte(lineage + "/" + applyID + "/" + pool + "/" + strconv.Itoa(seq)))
	tail := "-" + strconv.Itoa(seq) + "-" + hex.EncodeToString(sum[:])[:10]
	p := dnsLabel(pool)
	if room := validation.DNS1123LabelMaxLength - len("wdc-") - len(tail); len(p) > room {
		p = strings.TrimRight(p[:room], "-")
	}
	if p == "" {
		return "wdc" + tail
	}
	return "wdc-" + p + tail
}

// labelValue makes s a valid label value: at most 63 characters of
// [A-Za-z0-9._-], alphanumeric at both ends; a value that had to change
// keeps a hash of the original so two pools never share it.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:8]
	v := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, s)
	if len(v) > 63-9 {
		v = v[:63-9]
	}
	v = strings.Trim(v, "-_.")
	if v == "" {
		return h
	}
	return v + "-" + h
}

// dnsLabel lowercases s and turns every character a DNS-1123 label cannot
// hold into "-", trimming "-" at both ends.
func dnsLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	return strings.Trim(s, "-")
}

// SelectorLabels are the labels that find every object of one apply of a
// state's pool (pool "" for all its pools).
func SelectorLabels(lineage, applyID, pool string) map[string]string {
	l := map[string]string{LabelManagedBy: managedBy, LabelLineage: labelValue(lineage)}
	if applyID != "" {
		l[LabelApplyID] = labelValue(applyID)
	}
	if pool != "" {
		l[LabelPool] = labelValue(pool)
	}
	return l
}

// Render builds the objects of one launch from the pool's kubernetes block
// (s, with namespace already resolved) and the launch request, without a
// cluster. The Job runs `agent …` (providers.Render, with the pod's work
// folder) as the arguments of the image's own entrypoint, or of command
// when the block sets it; with agent_image, an init container from that
// image copies its agent (`install-agent`) into an emptyDir at agentDir,
// and the container runs image with that copy as its command, with the launch credential from
// the Secret through secretKeyRef; parallelism and completions 1,
// backoffLimit 0, restartPolicy Never, activeDeadlineSeconds and
// ttlSecondsAfterFinished from the block, a termination grace of the
// drain timeout plus 15 s so the agent drains on SIGTERM. The Lease has no
// holder until the worker registers. Errors: a name or label the API
// server would refuse (checked with apimachinery's validation).
func Render(req providers.LaunchRequest, s *Settings, namespace string) (*Objects, error) {
	name := ObjectName(req.Lineage, req.ApplyID, req.Pool, req.Seq)
	labels := SelectorLabels(req.Lineage, req.ApplyID, req.Pool)
	labels[LabelLaunchSeq] = strconv.Itoa(req.Seq)
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("kubernetes: label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("kubernetes: label %s=%q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: copyMap(labels), Annotations: copyMap(s.Annotations)}
	}
	argv := providers.Render(podRequest(req, s))
	var command []string
	if argv[0] != imageEntrypoint {
		command = argv[:1]
	}

	env := []corev1.EnvVar{{Name: protocol.LaunchCredentialEnv, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: credentialKey}}}}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, corev1.EnvVar{Name: k, Value: req.Env[k]})
	}
	res, err := resources(s)
	if err != nil {
		return nil, err
	}
	var tolerations []corev1.Toleration
	for _, t := range s.Tolerations {
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.Seconds})
	}
	grace := int64((req.DrainTimeout + 15*time.Second) / time.Second)
	if req.DrainTimeout == 0 {
		grace = 75 // the agent's default drain timeout, 60 s, plus 15 s
	}
	deadline := int64(s.ActiveDeadline / time.Second)
	ttl := int32(s.TTLAfterFinished / time.Second)
	one, zero := int32(1), int32(0)
	podMeta := metav1.ObjectMeta{Labels: copyMap(labels), Annotations: copyMap(s.Annotations)}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(),
		Spec: batchv1.JobSpec{
			Parallelism: &one, Completions: &one, BackoffLimit: &zero,
			ActiveDeadlineSeconds: &deadline, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta,
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					ServiceAccountName:            s.ServiceAccount,
					HostNetwork:                   s.HostNetwork,
					NodeSelector:                  copyMap(s.NodeSelector),
					Tolerations:                   tolerations,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:            containerName,
						Image:           s.Image,
						ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
						Command:         command,
						Args:            argv[1:],
						Env:             env,
						Resources:       res,
						VolumeMounts:    []corev1.VolumeMount{{Name: "work", MountPath: podWorkDir}},
					}},
					Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	if s.AgentImage != "" {
		ps := &job.Spec.Template.Spec
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		ps.InitContainers = []corev1.Container{{
			Name:            installContainerName,
			Image:           s.AgentImage,
			ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
			Args:            []string{"install-agent", agentPath},
			Resources:       res,
			VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
		}}
		ps.Containers[0].VolumeMounts = append(ps.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "agent", MountPath: agentDir, ReadOnly: true})
	}
	if s.HostNetwork {
		job.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	immutable := true
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  &immutable,
		Data:       map[string][]byte{credentialKey: []byte(req.Credential)},
	}
	leaseSeconds := int32(max(req.HeartbeatTTL/time.Second, 1))
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: meta(),
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: &leaseSeconds},
	}
	return &Objects{Secret: secret, Job: job, Lease: lease}, nil
}

// resources converts the block's requests and limits.
func resources(s *Settings) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	for _, r := range []struct {
		src Resources
		dst *corev1.ResourceList
	}{{s.Requests, &out.Requests}, {s.Limits, &out.Limits}} {
		for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: r.src.CPU, corev1.ResourceMemory: r.src.Memory} {
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return out, fmt.Errorf("kubernetes: %s %q: %w", name, v, err)
			}
			if *r.dst == nil {
				*r.dst = corev1.ResourceList{}
			}
			(*r.dst)[name] = q
		}
	}
	return out, nil
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// YAML returns the Secret (its data replaced by "(sensitive)"), the Lease
// and the Job as YAML documents, in that order (sigs.k8s.io/yaml).
func (o *Objects) YAML() ([]string, error) {
	secret := o.Secret.DeepCopy()
	secret.Data = nil
	secret.StringData = map[string]string{credentialKey: "(sensitive)"}
	var out []string
	for _, v := range []any{secret, o.Lease, o.Job} {
		b, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: rendering: %w", err)
		}
		out = append(out, string(b))
	}
	return out, nil
}
