// Package forge makes what a caller without credentials might send, for
// the tests that check that lbregistrar refuses or bounds it.
package forge

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
)

// HubData is a value of the nodes.peppy-ratio.dev/v1beta1-data annotation
// that no conversion wrote: a few kB, in conversion's compressed form, that
// expand to 4 MiB of hub data JSON, the most a value may expand to.
func HubData() string {
	return "gzip:" + base64.StdEncoding.EncodeToString(Gzip(`{"status":{"backendSets":[{"name":"`+strings.Repeat("a", 4<<20-64)+`"}]}}`))
}

// Gzip is s compressed as tightly as gzip can.
func Gzip(s string) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level
	_, _ = zw.Write([]byte(s))                               // into memory
	_ = zw.Close()
	return buf.Bytes()
}
