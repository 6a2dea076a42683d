package v1beta1

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnershipRecordIsGrouped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		owned   []Backend
		grouped string // the record's JSON
	}{
		{"empty", nil, `null`},
		{"one port and weight", []Backend{{"10.0.0.2", 31000, 1}, {"10.0.0.1", 31000, 1}},
			`[{"port":31000,"weight":1,"addresses":"10.0.0.1 10.0.0.2"}]`},
		{"ports and weights", []Backend{{"10.0.0.1", 31001, 1}, {"10.0.0.1", 31000, 5}, {"10.0.0.2", 31000, 1}, {"fd00::1", 31000, 1}},
			`[{"port":31000,"weight":1,"addresses":"10.0.0.2 fd00::1"},{"port":31000,"weight":5,"addresses":"10.0.0.1"},{"port":31001,"weight":1,"addresses":"10.0.0.1"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec BackendSetStatus
			rec.SetOwned(tc.owned)
			raw, err := json.Marshal(rec.Backends)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.grouped {
				t.Errorf("record %s, want %s", raw, tc.grouped)
			}
			var back BackendSetStatus
			if err := json.Unmarshal(raw, &back.Backends); err != nil {
				t.Fatal(err)
			}
			want := GroupBackends(tc.owned) // sorts
			if diff := cmp.Diff(rec.Owned(), back.Owned()); diff != "" || back.OwnedCount() != len(tc.owned) {
				t.Errorf("read back (-written +read), %d counted:\n%s", back.OwnedCount(), diff)
			}
			if diff := cmp.Diff(want, back.Backends); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

// Records written before grouping kept an object per backend, and records
// written before addresses were one string listed them; they read the same.
func TestOwnershipRecordReadsEarlierRecords(t *testing.T) {
	var rec BackendSetStatus
	legacy := `[{"ip":"10.0.0.2","port":31000,"weight":1},{"ip":"10.0.0.1","port":31000,"weight":1},` +
		`{"port":31001,"weight":2,"ips":["10.0.0.3","10.0.0.4"]},{"port":31002,"weight":1,"addresses":" 10.0.0.5  10.0.0.6 "}]`
	if err := json.Unmarshal([]byte(legacy), &rec.Backends); err != nil {
		t.Fatal(err)
	}
	want := []Backend{{"10.0.0.1", 31000, 1}, {"10.0.0.2", 31000, 1}, {"10.0.0.3", 31001, 2}, {"10.0.0.4", 31001, 2}, {"10.0.0.5", 31002, 1}, {"10.0.0.6", 31002, 1}}
	if diff := cmp.Diff(want, rec.Owned()); diff != "" || rec.OwnedCount() != len(want) {
		t.Errorf("owned (-want +got), %d counted:\n%s", rec.OwnedCount(), diff)
	}
}

// At 5,000 nodes a grouped record is a small fraction of an object per
// backend.
func TestOwnershipRecordSize(t *testing.T) {
	backends := make([]Backend, 5000)
	for i := range backends {
		backends[i] = Backend{IP: fmt.Sprintf("10.%d.%d.%d", 100+i/62500, i/250%250, i%250+1), Port: 31000, Weight: 1}
	}
	perBackend, _ := json.Marshal(backends)
	grouped, _ := json.Marshal(GroupBackends(backends))
	if len(grouped)*2 > len(perBackend) {
		t.Errorf("grouped %d bytes, an object per backend %d", len(grouped), len(perBackend))
	}
	t.Logf("5,000 backends: grouped %d bytes, an object per backend %d", len(grouped), len(perBackend))
}

// The drain record groups by the second a drain started and by port, and
// reads back what was written.
func TestDrainRecordIsGrouped(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	draining := []DrainingBackend{
		{"10.0.0.2", 31000, metav1.NewTime(t0.Add(300 * time.Millisecond))},
		{"10.0.0.1", 31000, metav1.NewTime(t0)},
		{"10.0.0.3", 31001, metav1.NewTime(t0)},
		{"10.0.0.4", 31000, metav1.NewTime(t0.Add(time.Second))},
	}
	var rec BackendSetStatus
	rec.SetDraining(draining)
	want := []DrainingGroup{
		{Since: metav1.NewTime(t0), Port: 31000, Addresses: "10.0.0.1 10.0.0.2"},
		{Since: metav1.NewTime(t0), Port: 31001, Addresses: "10.0.0.3"},
		{Since: metav1.NewTime(t0.Add(time.Second)), Port: 31000, Addresses: "10.0.0.4"},
	}
	if diff := cmp.Diff(want, rec.Draining); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if got := rec.DrainingBackends(); len(got) != len(draining) || got[1].IP != "10.0.0.2" || !got[1].Since.Equal(&want[0].Since) {
		t.Errorf("read back %+v", got)
	}
}
