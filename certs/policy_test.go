package certs

import (
	"crypto/x509"
	"testing"
	"time"
)

var (
	t0   = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	day  = 24 * time.Hour
	pol  = policy{hosts: []string{"svc.ns.svc", "127.0.0.1"}, caName: "test-ca", caValidity: 90 * day, servingValidity: 30 * day, propagationDelay: time.Hour}
	none = forced{}
)

// step runs the policy and round-trips the result through the Secret's data,
// as the Rotator does.
func step(t *testing.T, p policy, m material, at time.Time, f forced) (material, bool) {
	t.Helper()
	next, changed, err := p.next(m, at, f)
	if err != nil {
		t.Fatal(err)
	}
	if !p.usable(next, at) {
		t.Fatalf("at %s the serving certificate is not usable", at)
	}
	return readMaterial(next.data()), changed
}

func bootstrap(t *testing.T) material {
	m, changed := step(t, pol, material{}, t0, none)
	if !changed || len(m.trusted) != 1 || !signedBy(m.leaf, m.signer) {
		t.Fatalf("bootstrap: changed=%v trusted=%d", changed, len(m.trusted))
	}
	return m
}

func TestBootstrapFromNothingOrGarbage(t *testing.T) {
	bootstrap(t)
	garbage := readMaterial(map[string][]byte{caBundleKey: []byte("not pem"), caKeyKey: []byte("x"), "tls.crt": []byte("y")})
	if m, changed := step(t, pol, garbage, t0, none); !changed || !signedBy(m.leaf, m.signer) {
		t.Fatal("garbage in the Secret was not replaced")
	}
}

func TestSteadyStateWritesNothing(t *testing.T) {
	m := bootstrap(t)
	for _, at := range []time.Time{t0.Add(time.Hour), t0.Add(19 * day)} {
		if _, changed := step(t, pol, m, at, none); changed {
			t.Errorf("at %s: unexpected change", at)
		}
	}
}

func TestServingRenewalKeepsTheCA(t *testing.T) {
	m := bootstrap(t)
	at := t0.Add(21 * day) // past two thirds of 30 days
	next, changed := step(t, pol, m, at, none)
	if !changed || next.leaf.Equal(m.leaf) || !next.signer.Cert.Equal(m.signer.Cert) || len(next.trusted) != 1 {
		t.Fatalf("want a new serving certificate from the same CA, got changed=%v", changed)
	}
}

func TestHostChangeReissuesAtOnce(t *testing.T) {
	m := bootstrap(t)
	p := pol
	p.hosts = []string{"other.ns.svc"}
	next, changed := step(t, p, m, t0.Add(time.Minute), none)
	if !changed || next.leaf.VerifyHostname("other.ns.svc") != nil {
		t.Fatal("the serving certificate was not reissued for the new host")
	}
}

// TestCARotationIsStaged walks a CA rotation, due or forced, through its
// three steps and checks at each one that whatever a replica or the API
// server may still have keeps working with what the other has.
func TestCARotationIsStaged(t *testing.T) {
	for name, start := range map[string]struct {
		at time.Time
		f  forced
	}{
		"due":    {t0.Add(61 * day), none},
		"forced": {t0.Add(day), forced{ca: true}},
	} {
		t.Run(name, func(t *testing.T) {
			old := bootstrap(t)
			if start.at.After(t0.Add(20 * day)) {
				// Renew the serving certificate just before the CA is due,
				// so that only the CA rotation is in play.
				old, _ = step(t, pol, old, t0.Add(59*day), none)
			}

			staged, changed := step(t, pol, old, start.at, start.f)
			if !changed || len(staged.trusted) != 2 || !staged.leaf.Equal(old.leaf) || !staged.trusted[1].Equal(old.signer.Cert) {
				t.Fatalf("step 1: want the new CA beside the old one and the serving certificate unchanged")
			}
			if _, changed := step(t, pol, staged, start.at.Add(30*time.Minute), none); changed {
				t.Fatal("step 2 came before the bundle could propagate")
			}

			switched, changed := step(t, pol, staged, start.at.Add(time.Hour), none)
			if !changed || len(switched.trusted) != 2 || !signedBy(switched.leaf, switched.signer) || switched.leaf.Equal(old.leaf) {
				t.Fatal("step 2: want a serving certificate from the new CA, both CAs still trusted")
			}
			assertTrusts(t, switched.trusted, old.leaf, start.at.Add(time.Hour)) // a replica not yet reloaded
			if _, changed := step(t, pol, switched, start.at.Add(90*time.Minute), none); changed {
				t.Fatal("step 3 came before every replica could reload")
			}

			trimmed, changed := step(t, pol, switched, start.at.Add(2*time.Hour), none)
			if !changed || len(trimmed.trusted) != 1 || !trimmed.trusted[0].Equal(switched.signer.Cert) || !trimmed.leaf.Equal(switched.leaf) {
				t.Fatal("step 3: want the old CA gone and nothing else changed")
			}
		})
	}
}

func TestExpiredCAsLeaveTheBundle(t *testing.T) {
	m := bootstrap(t)
	staged, _ := step(t, pol, m, t0.Add(day), forced{ca: true})
	// Keep the old serving certificate (no step 2) past the old CA's expiry:
	// by then the old CA is useless and the serving certificate is reissued.
	next, changed := step(t, pol, staged, t0.Add(91*day), none)
	if !changed || len(next.trusted) != 1 || !signedBy(next.leaf, next.signer) {
		t.Fatalf("want only the new CA, got %d", len(next.trusted))
	}
}

func assertTrusts(t *testing.T, bundle []*x509.Certificate, leaf *x509.Certificate, at time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at}); err != nil {
		t.Fatalf("the bundle does not trust the serving certificate: %v", err)
	}
}

// A serving rotation asked while the CA is younger than the propagation
// delay is not lost: it waits, and happens once the CA is trusted.
func TestForcedServingWaitsForTheCA(t *testing.T) {
	m := bootstrap(t)
	early := t0.Add(time.Minute)
	serving := forced{serving: true}
	next, changed := step(t, pol, m, early, serving)
	if changed || !next.leaf.Equal(m.leaf) {
		t.Fatal("a serving certificate was issued before its CA could be trusted")
	}
	pending := pol.deferred(serving, next, early)
	if !pending.serving {
		t.Fatal("the forced serving rotation was dropped")
	}
	later := t0.Add(pol.propagationDelay)
	rotated, changed := step(t, pol, next, later, pending)
	if !changed || rotated.leaf.Equal(m.leaf) || !signedBy(rotated.leaf, rotated.signer) {
		t.Fatal("the deferred serving rotation did not happen once the CA was trusted")
	}
	if pol.deferred(pending, rotated, later).serving {
		t.Error("a rotation that happened is still pending")
	}
}
