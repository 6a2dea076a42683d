package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
)

// BenchmarkAdmission sends one v1beta1 create through the HTTP handler with
// n LBRegistrars in a real controller-runtime informer cache (its list and
// watch served from memory), beside a handler that admits without looking.
func BenchmarkAdmission(b *testing.B) {
	// Without a logger, controller-runtime says so in the middle of a
	// result line, which benchstat then cannot read.
	logf.SetLogger(logr.Discard())
	for _, n := range []int{100, 10000} {
		scheme := api.NewScheme()
		informers := filledCache(b, scheme, n)
		// The new resource shares a load balancer with ten existing ones.
		body := review(b, admissionv1.Create, hubObject("new", benchLoadBalancer(0), "new-a", "new-b"), nil)

		baseline := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		})}
		b.Run(fmt.Sprintf("%d/baseline", n), func(b *testing.B) { benchHandler(b, baseline, body) })
		b.Run(fmt.Sprintf("%d/validate", n), func(b *testing.B) {
			benchHandler(b, NewV1beta1Validator(informers, IdentityPolicy{Reviewer: secretReaders(nil)}, controllerUser), body)
		})
	}
}

func benchHandler(b *testing.B, h http.Handler, body []byte) {
	b.ReportAllocs()
	for b.Loop() {
		rec := post(h, ValidateV1beta1Path, body)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
			b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
	}
}

func benchLoadBalancer(i int) string {
	return "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaabench" + strconv.Itoa(i/10)
}

// filledCache starts a controller-runtime cache, with the claim index, whose
// LBRegistrar informer lists n resources (ten per load balancer) and then
// watches nothing.
func filledCache(b *testing.B, scheme *runtime.Scheme, n int) cache.Cache {
	b.Helper()
	list := &v1beta1.LBRegistrarList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range n {
		obj := hubObject("existing-"+strconv.Itoa(i), benchLoadBalancer(i), "set-"+strconv.Itoa(i%10))
		obj.ResourceVersion = "1"
		list.Items = append(list.Items, *obj)
	}
	lw := memoryListWatch{&toolscache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list.DeepCopy(), nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1beta1.GroupVersion.WithKind("LBRegistrar"), meta.RESTScopeRoot)
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{
		Scheme: scheme,
		Mapper: mapper,
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := c.IndexField(ctx, &v1beta1.LBRegistrar{}, index.ClaimField, index.ClaimFieldKeys); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	var synced v1beta1.LBRegistrarList
	if err := c.List(ctx, &synced); err != nil || len(synced.Items) != n {
		b.Fatalf("cache has %d LBRegistrars (%v), want %d", len(synced.Items), err, n)
	}
	return c
}

// memoryListWatch serves a fixed list and a silent watch; it has no
// streaming list, so the reflector lists first.
type memoryListWatch struct{ *toolscache.ListWatch }

func (memoryListWatch) IsWatchListSemanticsUnSupported() bool { return true }
