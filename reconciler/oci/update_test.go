package oci

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// TestUpdateBodyIsTheSDKs checks that an update's body, its backends
// encoded by encodeBackends, is the one the SDK's own encoder makes of the
// same request: every field set, optional ones nil, a mandatory one nil,
// and strings JSON must escape.
func TestUpdateBodyIsTheSDKs(t *testing.T) {
	odd := "<a&b> \"q\" \u2028 é"
	classic := []loadbalancer.BackendDetails{
		{IpAddress: common.String("10.0.0.1"), Port: common.Int(30080), Weight: common.Int(3), MaxConnections: common.Int(300),
			Backup: common.Bool(false), Drain: common.Bool(true), Offline: common.Bool(false)},
		{IpAddress: common.String("10.0.0.2"), Port: common.Int(30080)},
		{Port: common.Int(30081), Weight: common.Int(0)},
		{IpAddress: common.String(odd), Port: common.Int(-1)},
	}
	network := []networkloadbalancer.BackendDetails{
		{Port: common.Int(30080), Name: common.String("10.0.0.1:30080"), IpAddress: common.String("10.0.0.1"), TargetId: common.String("ocid1.instance.oc1..a"),
			Weight: common.Int(1), IsBackup: common.Bool(true), IsDrain: common.Bool(false), IsOffline: common.Bool(true)},
		{Port: common.Int(30080), TargetId: common.String("ocid1.instance.oc1..b")},
		{Name: common.String(odd)},
	}
	policy := "ROUND_ROBIN"
	for _, tc := range []struct {
		name string
		// request returns the typed request containing backends.
		request  func(backends any) common.OCIRequest
		backends any
		empty    any
	}{
		{"classic", func(b any) common.OCIRequest {
			return loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String("lb"), BackendSetName: common.String("bs"),
				UpdateBackendSetDetails: loadbalancer.UpdateBackendSetDetails{Policy: &policy, Backends: b.([]loadbalancer.BackendDetails)}}
		}, classic, []loadbalancer.BackendDetails{}},
		{"network", func(b any) common.OCIRequest {
			return networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String("nlb"), BackendSetName: common.String("bs"),
				UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{Policy: &policy, Backends: b.([]networkloadbalancer.BackendDetails)}}
		}, network, []networkloadbalancer.BackendDetails{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := body(t, tc.request(tc.backends), nil)
			got := body(t, tc.request(tc.empty), tc.backends)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-SDK's +ours):\n%s", diff)
			}
		})
	}
}

// body is the decoded JSON body of request as the SDK encodes it, with its
// backends replaced by backends when given.
func body(t *testing.T, request common.OCIRequest, backends any) any {
	t.Helper()
	req, err := request.HTTPRequest(http.MethodPut, "/x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if backends != nil {
		if err := setBackends(&req, backends); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := fmt.Sprint(len(raw)); req.Header.Get("Content-Length") != n || req.ContentLength != int64(len(raw)) {
		t.Errorf("Content-Length %s (%d), body of %s bytes", req.Header.Get("Content-Length"), req.ContentLength, n)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return out
}

// TestEncodeBackendsRefusesWhatItCannotEncode: a field of another shape (as
// a newer SDK might add) is an error, not a body that leaves it out.
func TestEncodeBackendsRefusesWhatItCannotEncode(t *testing.T) {
	type nested struct {
		Port  *int            `mandatory:"true" json:"port"`
		Extra *map[string]int `mandatory:"false" json:"extra"`
	}
	if _, err := encodeBackends([]nested{{Port: common.Int(1)}}); err == nil {
		t.Error("a map field was encoded")
	}
	type plain struct {
		Port int `mandatory:"true" json:"port"`
	}
	if _, err := encodeBackends([]plain{{Port: 1}}); err == nil {
		t.Error("a field that is not a pointer was encoded")
	}
}

// BenchmarkUpdateBody: encoding an update of 5,000 backends, the SDK's way
// (baseline) against sendUpdate's.
func BenchmarkUpdateBody(b *testing.B) {
	backends := make([]loadbalancer.BackendDetails, 5000)
	for i := range backends {
		backends[i] = loadbalancer.BackendDetails{IpAddress: common.String(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)), Port: common.Int(30080),
			Weight: common.Int(1), Backup: common.Bool(false), Drain: common.Bool(false), Offline: common.Bool(false)}
	}
	request := func(b []loadbalancer.BackendDetails) loadbalancer.UpdateBackendSetRequest {
		return loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String("lb"), BackendSetName: common.String("bs"),
			UpdateBackendSetDetails: loadbalancer.UpdateBackendSetDetails{Backends: b}}
	}
	b.Run("5000-backends/baseline", func(b *testing.B) {
		for b.Loop() {
			if _, err := request(backends).HTTPRequest(http.MethodPut, "/x", nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("5000-backends/set-backends", func(b *testing.B) {
		for b.Loop() {
			req, err := request([]loadbalancer.BackendDetails{}).HTTPRequest(http.MethodPut, "/x", nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := setBackends(&req, backends); err != nil {
				b.Fatal(err)
			}
		}
	})
}
