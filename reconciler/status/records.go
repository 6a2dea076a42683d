package status

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// recordWarnBytes is the size of a resource's ownership records past which
// it is warned: etcd refuses an object past 1.5 MiB by default
// (--max-request-bytes), and a resource whose intended record cannot be
// stored registers nothing more. At 5,000 nodes a backend set's record is
// about 60 kB, so the warning comes near 17 backend sets.
const recordWarnBytes = 1 << 20

// WarnLargeRecord warns when obj's ownership records near the size the API
// server can store, while splitting the resource is still a choice.
func (r *Writers) WarnLargeRecord(obj *v1beta1.LBRegistrar) {
	size := recordBytes(obj)
	if size < recordWarnBytes {
		return
	}
	backends := 0
	for _, rec := range obj.Status.BackendSets {
		backends += rec.OwnedCount()
	}
	r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1beta1.ReasonRecordLarge, "RecordOwnership",
		"the ownership record lists %d backends in %d backend sets, about %d KiB; past about 1.5 MiB (etcd's default request limit) the API server cannot store it, and this resource registers nothing more: split its services among more LBRegistrars",
		backends, len(obj.Status.BackendSets), size>>10)
}

// recordBytes is about the size of obj's ownership records in JSON,
// counted without encoding them.
func recordBytes(obj *v1beta1.LBRegistrar) int {
	size := 0
	for _, rec := range obj.Status.BackendSets {
		size += len(`{"name":"","backends":[]},`) + len(rec.Name)
		for _, g := range rec.Backends {
			size += len(`{"port":00000,"weight":000,"addresses":""},`) + len(g.Addresses) + len(g.IP)
			for _, ip := range g.IPs {
				size += len(ip) + len(`"",`)
			}
		}
	}
	return size
}

// FindEntry returns the entry of obj's ownership record for a backend
// set, or nil.
func FindEntry(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	for i := range obj.Status.BackendSets {
		if obj.Status.BackendSets[i].Name == name {
			return &obj.Status.BackendSets[i]
		}
	}
	return nil
}

// Entry returns the entry of obj's ownership record for a backend set,
// adding an empty one if needed.
func Entry(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	if rec := FindEntry(obj, name); rec != nil {
		return rec
	}
	obj.Status.BackendSets = append(obj.Status.BackendSets, v1beta1.BackendSetStatus{Name: name})
	slices.SortFunc(obj.Status.BackendSets, func(a, b v1beta1.BackendSetStatus) int { return strings.Compare(a.Name, b.Name) })
	return FindEntry(obj, name)
}

// DropEntry drops the entry of obj's ownership record for a backend set.
func DropEntry(obj *v1beta1.LBRegistrar, name string) {
	obj.Status.BackendSets = slices.DeleteFunc(obj.Status.BackendSets, func(s v1beta1.BackendSetStatus) bool { return s.Name == name })
}

// LastWorkRequest is the last work request obj's record keeps for a backend set.
func LastWorkRequest(obj *v1beta1.LBRegistrar, backendSet string) *v1beta1.WorkRequest {
	if rec := FindEntry(obj, backendSet); rec != nil {
		return rec.LastWorkRequest
	}
	return nil
}
