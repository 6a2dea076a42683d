package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
)

// answering is an HTTP client that keeps the last request and answers
// every request with a backend set.
type answering struct {
	body []byte
	last *http.Request
}

func (a *answering) Do(req *http.Request) (*http.Response, error) {
	a.last = req
	return &http.Response{StatusCode: http.StatusOK, Request: req, ContentLength: int64(len(a.body)),
		Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"e-1"`}, "Opc-Request-Id": {"r-1"}},
		Body:   io.NopCloser(bytes.NewReader(a.body))}, nil
}

// readFixture is a classic load balancer client, signing with a key of its
// own, parsed once as the controller's clients do, whose requests are answered by a backend set of n backends.
func readFixture(t testing.TB, n int) (loadbalancer.LoadBalancerClient, *answering) {
	t.Helper()
	key, keyPEM := NewKey(t)
	client, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(parsedKey{
		common.NewRawConfigurationProvider("ocid1.tenancy.oc1..t", "ocid1.user.oc1..u", "us-ashburn-1", "aa:bb", string(keyPEM), nil), key})
	if err != nil {
		t.Fatal(err)
	}
	set := loadbalancer.BackendSet{Name: common.String("bs-0"), Policy: common.String("ROUND_ROBIN"), Backends: []loadbalancer.Backend{}}
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
		set.Backends = append(set.Backends, loadbalancer.Backend{Name: common.String(ip + ":31000"), IpAddress: &ip, Port: common.Int(31000),
			Weight: common.Int(1), Drain: common.Bool(false), Backup: common.Bool(false), Offline: common.Bool(false)})
	}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	a := &answering{body: body}
	client.HTTPClient = a
	return client, a
}

// TestReadIsTheSDKs checks that readOne sends the request the SDK's
// generated method sends (the same method, URL and headers, signed over the
// same ones), reads the same backend set and ETag from its answer, and
// refuses an answer the SDK refuses.
func TestReadIsTheSDKs(t *testing.T) {
	client, a := readFixture(t, 3)
	ctx := context.Background()
	resp, err := client.GetBackendSet(ctx, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String("ocid1.loadbalancer.oc1..a"), BackendSetName: common.String("bs-0")})
	if err != nil {
		t.Fatal(err)
	}
	sdk := a.last
	var got loadbalancer.BackendSet
	etag, err := readOne(ctx, &client.BaseClient, "loadBalancer", "GetBackendSet", "/loadBalancers/ocid1.loadbalancer.oc1..a/backendSets/bs-0", &got)
	if err != nil {
		t.Fatal(err)
	}
	ours := a.last
	if ours.Method != sdk.Method || ours.URL.String() != sdk.URL.String() {
		t.Errorf("readOne sent %s %s; the SDK %s %s", ours.Method, ours.URL, sdk.Method, sdk.URL)
	}
	names := func(h http.Header) []string { return slices.Sorted(maps.Keys(h)) }
	if diff := cmp.Diff(names(sdk.Header), names(ours.Header)); diff != "" {
		t.Errorf("header names (-SDK +readOne):\n%s", diff)
	}
	for _, h := range []string{"Accept", "Content-Length", "Content-Type", "Opc-Client-Info", "Opc-Client-Retries", "User-Agent"} {
		if ours.Header.Get(h) != sdk.Header.Get(h) {
			t.Errorf("%s: readOne sent %q, the SDK %q", h, ours.Header.Get(h), sdk.Header.Get(h))
		}
	}
	signed := func(r *http.Request) string {
		auth := r.Header.Get("Authorization")
		_, after, _ := bytes.Cut([]byte(auth), []byte(`headers="`))
		before, _, _ := bytes.Cut(after, []byte(`"`))
		return string(before)
	}
	if signed(ours) == "" || signed(ours) != signed(sdk) {
		t.Errorf("readOne signed %q, the SDK %q", signed(ours), signed(sdk))
	}
	if len(ours.Header.Get("opc-request-id")) != 32 {
		t.Errorf("opc-request-id %q is not 16 bytes in hex", ours.Header.Get("opc-request-id"))
	}
	if diff := cmp.Diff(resp.BackendSet, got); diff != "" {
		t.Errorf("backend set (-SDK +readOne):\n%s", diff)
	}
	if etag != *resp.ETag {
		t.Errorf("ETag %q, the SDK read %q", etag, *resp.ETag)
	}

	a.body = append(a.body, `{}`...) // a second value after the backend set
	if _, err := client.GetBackendSet(ctx, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String("ocid1.loadbalancer.oc1..a"), BackendSetName: common.String("bs-0")}); err == nil {
		t.Error("the SDK read an answer with data after its JSON")
	}
	if _, err := readOne(ctx, &client.BaseClient, "loadBalancer", "GetBackendSet", "/loadBalancers/ocid1.loadbalancer.oc1..a/backendSets/bs-0", &got); err == nil {
		t.Error("readOne read an answer with data after its JSON")
	}
}

// BenchmarkRead compares the CPU of one read of a backend set of 148
// backends (the scale benchmark's pool), signed and decoded, answered in
// memory: the SDK's generated GetBackendSet (baseline) against readOne.
func BenchmarkRead(b *testing.B) {
	client, _ := readFixture(b, 148)
	ctx := context.Background()
	b.Run("148-backends/baseline", func(b *testing.B) {
		req := loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String("ocid1.loadbalancer.oc1..a"), BackendSetName: common.String("bs-0")}
		for b.Loop() {
			if _, err := client.GetBackendSet(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("148-backends/read-one", func(b *testing.B) {
		for b.Loop() {
			var set loadbalancer.BackendSet
			if _, err := readOne(ctx, &client.BaseClient, "loadBalancer", "GetBackendSet", "/loadBalancers/ocid1.loadbalancer.oc1..a/backendSets/bs-0", &set); err != nil {
				b.Fatal(err)
			}
		}
	})
}
