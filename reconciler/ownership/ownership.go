// Package ownership decides which ownership records the controller may act
// on: only those it can prove it wrote. The record in
// status.loadBalancerId and status.backendSets says which backends a
// resource registered, and the controller removes what a record lists and
// the resource no longer wants. Anyone allowed to write the status
// subresource, a restore from backup, or an annotation planted before
// lbregistrar was installed could otherwise make it remove backends that
// are not its own.
//
// The controller signs every record it writes with an HMAC-SHA256 under a
// key only it reads (a Secret in its namespace, see KeyStore), bound to
// the object's UID, so a record copied from another object or forged
// without the key does not verify. A record that does not verify is
// treated as no record: the resource adopts what it wants that is already
// registered and removes nothing, so at worst a backend is left behind,
// never one removed that is not its own.
//
// Signing and verifying are pure; KeyStore is the adapter that keeps the key.
package ownership

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"strings"
	"time"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// The signature's form is versioned by its prefix: v2 covers the drain
// record too; v1, written before there was one, still verifies a record
// that has none.
const (
	signaturePrefix   = "v2."
	signaturePrefixV1 = "v1."
)

// Sign returns the signature of obj's ownership record under key.
func Sign(key []byte, obj *v1beta1.LBRegistrar) string {
	mac := hmac.New(sha256.New, key)
	writeRecord(mac, obj, true)
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Recorded reports whether obj's status has an ownership record at all:
// a load balancer or a backend set.
func Recorded(obj *v1beta1.LBRegistrar) bool {
	return obj.Status.LoadBalancerID != "" || len(obj.Status.BackendSets) > 0
}

// Vouched reports whether the controller may act on obj's ownership
// record: there is none, or its signature verifies under key. With no key
// (none was ever made) no record verifies.
func Vouched(key []byte, obj *v1beta1.LBRegistrar) bool {
	if !Recorded(obj) {
		return true
	}
	if key == nil {
		return false
	}
	draining := true
	sig, ok := strings.CutPrefix(obj.Status.RecordSignature, signaturePrefix)
	if !ok {
		sig, ok = strings.CutPrefix(obj.Status.RecordSignature, signaturePrefixV1)
		draining = false
		if !ok || drains(obj) {
			return false
		}
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	writeRecord(mac, obj, draining)
	return hmac.Equal(got, mac.Sum(nil))
}

// drains reports whether obj's record keeps backends drained.
func drains(obj *v1beta1.LBRegistrar) bool {
	for _, bs := range obj.Status.BackendSets {
		if len(bs.Draining) > 0 {
			return true
		}
	}
	return false
}

// Drop removes obj's ownership record and its signature.
func Drop(obj *v1beta1.LBRegistrar) {
	obj.Status.LoadBalancerID = ""
	obj.Status.BackendSets = nil
	obj.Status.RecordSignature = ""
}

// writeRecord writes what a signature covers: the object's UID, the load
// balancer, and each backend set's name and backends as stored (every form
// a record may store them in), each field length-prefixed so that no two
// records write the same bytes; with draining, each backend set's drain
// record too (v2). Work requests and health are not covered:
// the controller rewrites them alone after a conflict, and neither names a
// backend to remove.
func writeRecord(h hash.Hash, obj *v1beta1.LBRegistrar, draining bool) {
	var buf [binary.MaxVarintLen64]byte
	field := func(s string) {
		h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	number := func(n int64) { h.Write(buf[:binary.PutVarint(buf[:], n)]) }
	field(string(obj.UID))
	field(obj.Status.LoadBalancerID)
	number(int64(len(obj.Status.BackendSets)))
	for _, bs := range obj.Status.BackendSets {
		field(bs.Name)
		number(int64(len(bs.Backends)))
		for _, g := range bs.Backends {
			number(int64(g.Port))
			number(int64(g.Weight))
			field(g.Addresses)
			field(g.IP)
			number(int64(len(g.IPs)))
			for _, ip := range g.IPs {
				field(ip)
			}
		}
		if draining {
			number(int64(len(bs.Draining)))
			for _, g := range bs.Draining {
				field(g.Since.UTC().Format(time.RFC3339))
				number(int64(g.Port))
				field(g.Addresses)
			}
		}
	}
}
