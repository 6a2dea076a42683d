package certs

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the built-in mode's Secret besides tls.crt and tls.key. ca.crt is
// the CA bundle the API server must trust: the signing CA first, then any
// older CA kept while a serving certificate it signed may still be in use.
const (
	caBundleKey = "ca.crt"
	caKeyKey    = "ca.key"
)

// material is what the built-in mode keeps in its Secret, as far as it is
// usable: a part that does not parse is nil and gets replaced.
type material struct {
	signer  *CA
	trusted []*x509.Certificate
	serving KeyPair
	leaf    *x509.Certificate
}

func readMaterial(data map[string][]byte) material {
	var m material
	m.trusted = parseCertificates(data[caBundleKey])
	if len(m.trusted) > 0 {
		first := encodePEM("CERTIFICATE", m.trusted[0].Raw)
		if ca, err := parseCA(first, data[caKeyKey]); err == nil {
			m.signer = ca
		}
	}
	if pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err == nil {
		m.serving = KeyPair{CertPEM: data[corev1.TLSCertKey], KeyPEM: data[corev1.TLSPrivateKeyKey]}
		m.leaf = pair.Leaf
	}
	return m
}

func (m material) data() map[string][]byte {
	return map[string][]byte{
		caBundleKey:             encodeBundle(m.trusted),
		caKeyKey:                m.signer.keyPEM,
		corev1.TLSCertKey:       m.serving.CertPEM,
		corev1.TLSPrivateKeyKey: m.serving.KeyPEM,
	}
}

// policy decides, from the Secret's content and the time, what the Secret
// should contain next. Rotation is staged so that every step is safe whatever
// each replica and the API server still have:
//
//  1. a new CA is added to the bundle beside the old one, and the serving
//     certificate is left alone;
//  2. once the bundle has had propagationDelay to reach the API server, a
//     serving certificate signed by the new CA is issued;
//  3. once that certificate has had propagationDelay to reach every replica,
//     the old CA leaves the bundle.
type policy struct {
	hosts            []string
	caName           string
	caValidity       time.Duration
	servingValidity  time.Duration
	propagationDelay time.Duration
}

// forced asks for a rotation before it is due.
type forced struct{ ca, serving bool }

// next returns the material the Secret should contain at now, and whether it
// differs from m.
func (p policy) next(m material, now time.Time, force forced) (material, bool, error) {
	changed := false
	switch {
	case m.signer == nil || !now.Before(m.signer.Cert.NotAfter):
		// Nothing usable to stage a rotation from: start over.
		ca, err := NewCA(p.caName, now, p.caValidity)
		if err != nil {
			return m, false, err
		}
		m = material{signer: ca, trusted: []*x509.Certificate{ca.Cert}}
		changed = true
	case force.ca || !now.Before(renewalTime(m.signer.Cert)):
		ca, err := NewCA(p.caName, now, p.caValidity)
		if err != nil {
			return m, false, err
		}
		m.signer = ca
		m.trusted = append([]*x509.Certificate{ca.Cert}, m.trusted...)
		changed = true
	}
	if kept := p.unexpired(m, now); len(kept) != len(m.trusted) {
		m.trusted, changed = kept, true
	}

	signerPublished := p.signerPublished(m, now)
	switch {
	case !p.usable(m, now):
		// Nothing trusted is being served, so there is nothing to protect.
		changed = true
		if err := p.issue(&m, now); err != nil {
			return m, false, err
		}
	case signerPublished && (force.serving || !signedBy(m.leaf, m.signer) || !now.Before(renewalTime(m.leaf))):
		changed = true
		if err := p.issue(&m, now); err != nil {
			return m, false, err
		}
	}

	if len(m.trusted) > 1 && signedBy(m.leaf, m.signer) && !now.Before(issuedAt(m.leaf).Add(p.propagationDelay)) {
		m.trusted = m.trusted[:1]
		changed = true
	}
	return m, changed, nil
}

// signerPublished reports whether the signing CA has had propagationDelay to
// reach the API server, so a certificate it signs may be served.
func (p policy) signerPublished(m material, now time.Time) bool {
	return !now.Before(issuedAt(m.signer.Cert).Add(p.propagationDelay))
}

// deferred is what next could not do yet of what force asked, given the
// material it produced: a serving rotation asked while the signing CA is
// still propagating waits until the CA is trusted, instead of being dropped.
func (p policy) deferred(force forced, m material, now time.Time) forced {
	return forced{serving: force.serving && !p.signerPublished(m, now)}
}

// unexpired is the bundle without expired CAs; the signer always stays first.
func (p policy) unexpired(m material, now time.Time) []*x509.Certificate {
	kept := []*x509.Certificate{m.signer.Cert}
	for _, c := range m.trusted {
		if !c.Equal(m.signer.Cert) && now.Before(c.NotAfter) {
			kept = append(kept, c)
		}
	}
	return kept
}

// usable reports whether the serving certificate is valid now for every host
// and chains to a CA of the bundle.
func (p policy) usable(m material, now time.Time) bool {
	if m.leaf == nil {
		return false
	}
	roots := x509.NewCertPool()
	for _, c := range m.trusted {
		roots.AddCert(c)
	}
	if _, err := m.leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return false
	}
	return !slices.ContainsFunc(p.hosts, func(h string) bool { return m.leaf.VerifyHostname(h) != nil })
}

func (p policy) issue(m *material, now time.Time) error {
	pair, err := m.signer.IssueServing(p.hosts, now, p.servingValidity)
	if err != nil {
		return err
	}
	leaf, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return err
	}
	m.serving, m.leaf = pair, leaf.Leaf
	return nil
}

func signedBy(leaf *x509.Certificate, ca *CA) bool {
	return leaf != nil && leaf.CheckSignatureFrom(ca.Cert) == nil
}
