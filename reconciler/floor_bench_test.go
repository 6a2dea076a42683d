package reconciler_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"math"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/scale"
)

// backendSetFloor is the CPU one backend set of n backends costs any
// client of OCI's API, in seconds, measured in this process: decoding
// GetBackendSet's answer into the SDK's types (a classic and an NLB one,
// on average, as BenchmarkScale has both), encoding an update of them
// (encoding/json over the SDK's request type; the adapter's own encoder is
// a little cheaper), and signing a request (the update: the body's digest
// and an RSA-2048 signature; a read's or a poll's has no body to digest).
type backendSetFloor struct{ decode, encode, sign float64 }

// write is the floor of one write: its read decoded, its update encoded,
// and four requests signed: the read, the update, one poll of its work
// request and the read of the backend set's health that follows it (serve
// reads health by default, --backend-health).
func (f backendSetFloor) write() float64 { return f.decode + f.encode + 4*f.sign }

// resync is the floor of one backend set's resync at rest: its read and
// its health's signed, its answer decoded.
func (f backendSetFloor) resync() float64 { return f.decode + 2*f.sign }

func measureFloor(b *testing.B, n int) backendSetFloor {
	b.Helper()
	classic, network := make([]loadbalancer.Backend, n), make([]networkloadbalancer.Backend, n)
	details := make([]loadbalancer.BackendDetails, n)
	for i := range n {
		ip, port, weight, no := common.String(scale.NodeIP(i)), common.Int(31000), common.Int(1), common.Bool(false)
		name := common.String(*ip + ":31000")
		classic[i] = loadbalancer.Backend{Name: name, IpAddress: ip, Port: port, Weight: weight, Drain: no, Backup: no, Offline: no}
		network[i] = networkloadbalancer.Backend{Name: name, IpAddress: ip, Port: port, Weight: weight, IsDrain: no, IsBackup: no, IsOffline: no}
		details[i] = loadbalancer.BackendDetails{IpAddress: ip, Port: port, Weight: weight, Drain: no, Backup: no, Offline: no}
	}
	classicBody, err := json.Marshal(loadbalancer.BackendSet{Name: common.String("bs-0"), Policy: common.String("ROUND_ROBIN"), Backends: classic})
	if err != nil {
		b.Fatal(err)
	}
	networkBody, err := json.Marshal(networkloadbalancer.BackendSet{Name: common.String("bs-0"), Backends: network})
	if err != nil {
		b.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	signer := common.DefaultRequestSigner(signingKey{key})
	var body []byte
	return backendSetFloor{
		decode: perOp(b, func() error {
			var c loadbalancer.BackendSet
			var nlb networkloadbalancer.BackendSet
			if err := json.Unmarshal(classicBody, &c); err != nil {
				return err
			}
			return json.Unmarshal(networkBody, &nlb)
		}) / 2,
		encode: perOp(b, func() (err error) {
			body, err = json.Marshal(loadbalancer.UpdateBackendSetDetails{Backends: details})
			return err
		}),
		sign: perOp(b, func() error {
			req, err := http.NewRequest(http.MethodPut, "https://iaas.us-ashburn-1.oraclecloud.com/20170115/loadBalancers/lb/backendSets/bs-0", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength = int64(len(body))
			return signer.Sign(req)
		}),
	}
}

// signingKey hands the signer a key parsed once, as any client signing
// many requests would: the SDK's configuration providers parse the PEM
// again for every signature.
type signingKey struct{ key *rsa.PrivateKey }

func (k signingKey) PrivateRSAKey() (*rsa.PrivateKey, error) { return k.key, nil }

func (signingKey) KeyID() (string, error) { return "ocid1.tenancy.oc1..t/ocid1.user.oc1..u/aa:bb", nil }

// perOp is the CPU time one call of op takes, on one OS thread (where the
// thread's clock is not known, the time it takes, which other work on the
// machine inflates). It is the mean of the quickest of a few batches, after
// one call to warm up.
func perOp(b *testing.B, op func() error) float64 {
	b.Helper()
	const batches, runs = 5, 10
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := func() time.Duration { return time.Duration(time.Now().UnixNano()) }
	if _, ok := scale.ThreadCPU(); ok {
		clock = func() time.Duration { d, _ := scale.ThreadCPU(); return d }
	}
	if err := op(); err != nil {
		b.Fatal(err)
	}
	quickest := time.Duration(math.MaxInt64)
	for range batches {
		start := clock()
		for range runs {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		quickest = min(quickest, clock()-start)
	}
	return quickest.Seconds() / runs
}
