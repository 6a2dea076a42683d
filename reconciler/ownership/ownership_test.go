package ownership

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

func signedRecord(key []byte) *v1beta1.LBRegistrar {
	obj := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "uid-1"}}
	obj.Status.LoadBalancerID = "ocid1.loadbalancer.oc1.iad.a"
	obj.Status.BackendSets = []v1beta1.BackendSetStatus{
		{Name: "api", Backends: []v1beta1.BackendGroup{{Port: 30080, Weight: 1, Addresses: "10.0.0.1 10.0.0.2"}}},
		{Name: "web", Backends: []v1beta1.BackendGroup{{Port: 30443, Weight: 2, IPs: []string{"10.0.0.3"}}, {Port: 30444, Weight: 1, IP: "10.0.0.4"}},
			Draining: []v1beta1.DrainingGroup{{Since: metav1.NewTime(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)), Port: 30443, Addresses: "10.0.0.3"}}},
	}
	obj.Status.RecordSignature = Sign(key, obj)
	return obj
}

// signV1 signs obj in the form written before drain records existed.
func signV1(key []byte, obj *v1beta1.LBRegistrar) string {
	mac := hmac.New(sha256.New, key)
	writeRecord(mac, obj, false)
	return signaturePrefixV1 + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestVouched(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210fedcba9876543210")
	tests := []struct {
		name   string
		key    []byte
		change func(*v1beta1.LBRegistrar)
		want   bool
	}{
		{"signed by the key", key, func(*v1beta1.LBRegistrar) {}, true},
		{"no record needs no signature", nil, Drop, true},
		{"work requests and health are not covered", key, func(o *v1beta1.LBRegistrar) {
			o.Status.BackendSets[0].LastWorkRequest = &v1beta1.WorkRequest{ID: "wr"}
			o.Status.BackendSets[0].Health = &v1beta1.BackendSetHealth{Status: "OK"}
			o.Status.Conditions = []metav1.Condition{{Type: "Ready"}}
		}, true},
		{"another key", other, func(*v1beta1.LBRegistrar) {}, false},
		{"no key yet", nil, func(*v1beta1.LBRegistrar) {}, false},
		{"unsigned", key, func(o *v1beta1.LBRegistrar) { o.Status.RecordSignature = "" }, false},
		{"not base64", key, func(o *v1beta1.LBRegistrar) { o.Status.RecordSignature = "v1.!!" }, false},
		{"another form", key, func(o *v1beta1.LBRegistrar) { o.Status.RecordSignature = "v0." + o.Status.RecordSignature[3:] }, false},
		{"copied to another object", key, func(o *v1beta1.LBRegistrar) { o.UID = "uid-2" }, false},
		{"another load balancer", key, func(o *v1beta1.LBRegistrar) { o.Status.LoadBalancerID = "ocid1.loadbalancer.oc1.iad.b" }, false},
		{"a backend set renamed", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[0].Name = "apj" }, false},
		{"a backend set added", key, func(o *v1beta1.LBRegistrar) {
			o.Status.BackendSets = append(o.Status.BackendSets, v1beta1.BackendSetStatus{Name: "x"})
		}, false},
		{"an address added", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[0].Backends[0].Addresses += " 192.168.9.9" }, false},
		{"a port changed", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[0].Backends[0].Port = 8080 }, false},
		{"a weight changed", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[0].Backends[0].Weight = 3 }, false},
		{"an earlier-form address changed", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[1].Backends[0].IPs[0] = "10.0.0.9" }, false},
		{"a single address changed", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[1].Backends[1].IP = "10.0.0.9" }, false},
		{"addresses moved between fields", key, func(o *v1beta1.LBRegistrar) {
			g := &o.Status.BackendSets[1].Backends[1]
			g.Addresses, g.IP = g.IP, ""
		}, false},
		{"a drain time changed", key, func(o *v1beta1.LBRegistrar) {
			o.Status.BackendSets[1].Draining[0].Since = metav1.NewTime(o.Status.BackendSets[1].Draining[0].Since.Add(-time.Hour))
		}, false},
		{"a draining address added", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[1].Draining[0].Addresses += " 10.0.0.4" }, false},
		{"a drain record dropped", key, func(o *v1beta1.LBRegistrar) { o.Status.BackendSets[1].Draining = nil }, false},
		{"signed before drain records existed", key, func(o *v1beta1.LBRegistrar) {
			o.Status.BackendSets[1].Draining = nil
			o.Status.RecordSignature = signV1(key, o)
		}, true},
		{"an earlier signature over a record that drains", key, func(o *v1beta1.LBRegistrar) { o.Status.RecordSignature = signV1(key, o) }, false},
		{"a record on an object that had none", key, func(o *v1beta1.LBRegistrar) {
			o.Status.RecordSignature = Sign(key, &v1beta1.LBRegistrar{ObjectMeta: o.ObjectMeta})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := signedRecord(key)
			tt.change(obj)
			if got := Vouched(tt.key, obj); got != tt.want {
				t.Errorf("Vouched = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDrop(t *testing.T) {
	obj := signedRecord([]byte("k"))
	obj.Status.Healthy = "1/1"
	Drop(obj)
	if Recorded(obj) || obj.Status.RecordSignature != "" || obj.Status.Healthy != "1/1" {
		t.Errorf("after Drop: %+v", obj.Status)
	}
}
