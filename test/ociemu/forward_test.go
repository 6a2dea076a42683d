package ociemu_test

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// greeter is a TCP server that answers every connection with its name.
func greeter(t *testing.T, name string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name)) // the reader checks what arrived
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func dialRead(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	must(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	data, _ := io.ReadAll(c)
	return string(data)
}

// Traffic through a load balancer's forwarder reaches exactly the backends
// registered through the API that are not drained.
func TestForwarderReachesRegisteredBackends(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	blue, green := greeter(t, "blue"), greeter(t, "green")

	update, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{
		NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"),
		UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{IsPreserveSource: common.Bool(false), Backends: []networkloadbalancer.BackendDetails{
			{IpAddress: common.String("127.0.0.1"), Port: common.Int(blue)},
			{IpAddress: common.String("127.0.0.1"), Port: common.Int(green), IsDrain: common.Bool(true)},
		}}})
	must(t, err)
	f.waitNetwork(t, *update.OpcWorkRequestId)
	addr, err := f.emu.Forward(networkID, "tcp")
	must(t, err)
	for range 3 {
		if got := dialRead(t, addr); got != "blue" {
			t.Fatalf("got %q through the forwarder, want blue", got)
		}
	}

	for name, drain := range map[int]bool{blue: true, green: false} {
		resp, err := f.nlb.UpdateBackend(f.context, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("127.0.0.1:" + strconv.Itoa(name)),
			UpdateBackendDetails: networkloadbalancer.UpdateBackendDetails{IsDrain: common.Bool(drain)}})
		must(t, err)
		f.waitNetwork(t, *resp.OpcWorkRequestId)
	}
	if got := dialRead(t, addr); got != "green" {
		t.Fatalf("got %q after draining blue, want green", got)
	}

	if _, err := f.emu.Forward(classicID, "nosuch"); err == nil {
		t.Errorf("forwarding an unknown backend set succeeded")
	}
	classicAddr, err := f.emu.Forward(classicID, "web")
	must(t, err)
	set := f.classicSet(t)
	lbUpdate, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
		BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(set.BackendSet,
			loadbalancer.BackendDetails{IpAddress: common.String("127.0.0.1"), Port: common.Int(green), Offline: common.Bool(true)},
			loadbalancer.BackendDetails{IpAddress: common.String("127.0.0.1"), Port: common.Int(blue), Backup: common.Bool(true)})})
	must(t, err)
	f.waitClassic(t, *lbUpdate.OpcWorkRequestId)
	if got := dialRead(t, classicAddr); got != "blue" {
		t.Fatalf("got %q through the classic forwarder, want the backup (blue) as the only one online", got)
	}
}

// Concurrent writers see exactly one accepted write per work request and a
// 409 for every other attempt; the race detector watches the emulator.
func TestConcurrentWriters(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 20 * time.Millisecond}, false)
	const writers, attempts = 6, 8
	var (
		mu                   sync.Mutex
		accepted, conflicted int
		wg                   sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts {
				req := f.emptyNetworkUpdate()
				req.Backends = []networkloadbalancer.BackendDetails{{IpAddress: common.String("10.1.0." + strconv.Itoa(w)), Port: common.Int(1000 + i)}}
				_, err := f.nlb.UpdateBackendSet(f.context, req)
				mu.Lock()
				if err == nil {
					accepted++
				} else if se, ok := common.IsServiceError(err); ok && se.GetHTTPStatusCode() == 409 {
					conflicted++
				} else {
					t.Errorf("unexpected error: %v", err)
				}
				mu.Unlock()
				if _, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
					NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")}); err != nil {
					t.Errorf("read: %v", err)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	c := f.emu.Counters()
	if accepted+conflicted != writers*attempts || accepted == 0 || c.Writes[networkID] != accepted || c.Conflicts != conflicted || c.WorkRequests != accepted {
		t.Errorf("accepted %d, conflicted %d, counters %+v", accepted, conflicted, c)
	}
}
