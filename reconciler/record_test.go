package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// Ownership records of the earlier forms (an object per backend, and a
// group listing its addresses) come from before records were signed: the
// API server keeps them, and the controller takes them for no record, as
// it must any record it cannot vouch for. The backend still wanted is
// adopted, the one whose node is gone is left registered rather than
// removed on an unsigned record's word, and the record is written anew,
// signed, in groups of one string of addresses.
func TestEarlierRecordsAreNotActedOn(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.42.1")
	f.node(f.ns+"-b", "10.0.42.2")
	_, stop := f.startManager(f.options())
	obj := f.registrar("ungrouped", classicLB, []v1beta1.Target{fixedPort("admin", 31042)})
	f.eventually(20*time.Second, func() error {
		if got := f.backends(classicLB, "admin"); len(got) != 2 {
			return fmt.Errorf("admin has %v", got)
		}
		return nil
	})
	stop()

	legacy := `{"status":{"backendSets":[{"name":"admin","backends":[` +
		`{"ip":"10.0.42.1","port":31042,"weight":1},{"port":31042,"weight":1,"ips":["10.0.42.2"]}]}]}}`
	f.must(k8s.Status().Patch(f.ctx, f.get(obj), client.RawPatch(types.MergePatchType, []byte(legacy))))
	if rec := f.get(obj).Status.BackendSets[0]; len(rec.Backends) != 2 || rec.Backends[0].IP == "" || len(rec.Backends[1].IPs) != 1 {
		t.Fatalf("the API server did not keep the record of earlier forms: %+v", rec)
	}
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-b"}}))
	f.startManager(f.options())
	f.eventually(20*time.Second, func() error {
		o := f.get(obj)
		if len(o.Status.BackendSets) == 0 { // the untrusted record dropped, the new one not written yet
			return fmt.Errorf("no record yet")
		}
		rec := o.Status.BackendSets[0]
		if len(rec.Backends) != 1 || rec.Backends[0].IP != "" || rec.Backends[0].IPs != nil || rec.Backends[0].Addresses != "10.0.42.1" || o.Status.RecordSignature == "" {
			return fmt.Errorf("record %+v (signature %q), want one group of 10.0.42.1, signed", rec.Backends, o.Status.RecordSignature)
		}
		return nil
	})
	f.expectBackends(classicLB, "admin", "10.0.42.1:31042/1", "10.0.42.2:31042/1")
}
