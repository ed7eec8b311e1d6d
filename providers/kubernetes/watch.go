package kubernetes

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// watchKey names the objects of one apply in one namespace: what one
// watch covers.
type watchKey struct{ namespace, lineage, applyID string }

// watch is a pair of informers, on the Jobs and on the pods of one apply
// in one namespace (selected by the apply's labels). An informer lists,
// then watches, and lists again when its watch expires (410 Gone), so no
// change is missed and no worker is polled.
type watch struct{ stop func() }

// watch starts the informers for an apply's objects in ns, once, and
// waits until they have listed.
func (p *Provider) watch(cl *cluster, ns, lineage, applyID string) error {
	k := watchKey{ns, lineage, applyID}
	p.mu.Lock()
	if cl.watches[k] != nil {
		p.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl.watches[k] = &watch{stop: cancel}
	p.mu.Unlock()

	selector := labels.SelectorFromSet(SelectorLabels(lineage, applyID, "")).String()
	tweak := func(o metav1.ListOptions) metav1.ListOptions { o.LabelSelector = selector; return o }
	jobs, pods := cl.Batch.Jobs(ns), cl.Core.Pods(ns)
	jobInformer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return jobs.List(ctx, tweak(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			return jobs.Watch(ctx, tweak(o))
		},
	}, cl.Clients), &batchv1.Job{}, 0, cache.Indexers{})
	podInformer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, tweak(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			return pods.Watch(ctx, tweak(o))
		},
	}, cl.Clients), &corev1.Pod{}, 0, cache.Indexers{})
	handler := func(observe func(obj any, deleted bool)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { observe(obj, false) },
			UpdateFunc: func(_, obj any) { observe(obj, false) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				observe(obj, true)
			},
		}
	}
	if _, err := jobInformer.AddEventHandler(handler(func(obj any, deleted bool) {
		if j, ok := obj.(*batchv1.Job); ok {
			p.observeJob(j, deleted)
		}
	})); err != nil {
		cancel()
		return fmt.Errorf("kubernetes: watching Jobs: %w", err)
	}
	if _, err := podInformer.AddEventHandler(handler(func(obj any, deleted bool) {
		if pod, ok := obj.(*corev1.Pod); ok {
			p.observePod(pod, deleted)
		}
	})); err != nil {
		cancel()
		return fmt.Errorf("kubernetes: watching pods: %w", err)
	}
	go jobInformer.RunWithContext(ctx)
	go podInformer.RunWithContext(ctx)
	sctx, scancel := context.WithTimeout(ctx, requestTimeout)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), jobInformer.HasSynced, podInformer.HasSynced) {
		p.mu.Lock()
		delete(cl.watches, k)
		p.mu.Unlock()
		cancel()
		return fmt.Errorf("kubernetes: could not list Jobs and pods in namespace %s on %s within %s", ns, cl.Server, requestTimeout)
	}
	return nil
}
