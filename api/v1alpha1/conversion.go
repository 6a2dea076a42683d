package v1alpha1

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const (
	// AlphaSpecAnnotation is the annotation that, on a v1beta1 object, keeps a v1alpha1 spec whose
	// exact shape (single service, port beside nodePort, ignored fields) the
	// v1beta1 form cannot represent, so that it reads back exactly as it was
	// written.
	AlphaSpecAnnotation = "nodes.peppy-ratio.dev/v1alpha1-spec"

	// HubDataAnnotation is the annotation that, on a v1alpha1 object, keeps the v1beta1 spec and
	// status that v1alpha1 cannot express.
	HubDataAnnotation = "nodes.peppy-ratio.dev/v1beta1-data"

	// UncheckedIdentityAnnotation is the annotation that, on a v1beta1 object, names (as
	// LBRegistrarSpec.Identity does) the identity other than an API key that
	// conversion took from HubDataAnnotation. No admission check may have
	// seen it: the original operator's CRD stores any annotation, so an
	// object written before lbregistrar was installed can carry any
	// identity there. The controller does not sign in with an identity so
	// marked; a write that removes the mark is checked as one that names it.
	UncheckedIdentityAnnotation = "nodes.peppy-ratio.dev/unchecked-identity"
)

// ConversionAnnotations are the annotations only conversion writes.
var ConversionAnnotations = []string{HubDataAnnotation, AlphaSpecAnnotation, UncheckedIdentityAnnotation}

// hubData is the content of HubDataAnnotation; only the parts that v1alpha1
// could not carry are set.
type hubData struct {
	Spec   *v1beta1.LBRegistrarSpec   `json:"spec,omitempty"`
	Status *v1beta1.LBRegistrarStatus `json:"status,omitempty"`
}

// ToHub converts a v1alpha1 object to v1beta1.
func ToHub(src *LBRegistrar, dst *v1beta1.LBRegistrar) {
	kept := decodeAnnotation[hubData](src.Annotations, HubDataAnnotation)
	if kept == nil {
		kept = &hubData{}
	}

	dst.APIVersion, dst.Kind = v1beta1.GroupVersion.String(), "LBRegistrar"
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = withoutAnnotation(dst.Annotations, HubDataAnnotation)

	dst.Spec = NormalizeSpec(&src.Spec)
	if kept.Spec != nil {
		if semanticEqual(DenormalizeSpec(kept.Spec), src.Spec) {
			dst.Spec = *kept.Spec
		} else {
			restoreHubOnly(&dst.Spec, kept.Spec, &src.Spec.APIKey)
		}
	}
	if !semanticEqual(DenormalizeSpec(&dst.Spec), src.Spec) {
		dst.Annotations = withAnnotation(dst.Annotations, AlphaSpecAnnotation, src.Spec)
	}
	if dst.Spec.APIKey == nil { // v1alpha1 shows only API keys: this one came from kept
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[UncheckedIdentityAnnotation] = dst.Spec.Identity()
	}

	switch {
	case kept.Status == nil:
		dst.Status = StatusFromPhase(src.Status.Phase, src.CreationTimestamp)
	case PhaseFromConditions(kept.Status.Conditions) == src.Status.Phase:
		dst.Status = *kept.Status
	default:
		// A phase written through v1alpha1 (the original operator writes one
		// on every pass) changes the Ready condition it stands for and
		// nothing else: the ownership record and the other conditions stay.
		dst.Status = *kept.Status
		dst.Status.Conditions = withPhase(kept.Status.Conditions, src.Status.Phase, src.CreationTimestamp)
	}
}

// FromHub converts a v1beta1 object to v1alpha1: the v1alpha1 spec kept by
// ToHub while it still means the same, else the v1beta1 spec in v1alpha1's
// words, and what v1alpha1 cannot represent kept in HubDataAnnotation, so
// that ToHub restores it.
func FromHub(src *v1beta1.LBRegistrar, dst *LBRegistrar) {
	alphaSpec := decodeAnnotation[LBRegistrarSpec](src.Annotations, AlphaSpecAnnotation)

	dst.APIVersion, dst.Kind = GroupVersion.String(), "LBRegistrar"
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = withoutAnnotation(dst.Annotations, AlphaSpecAnnotation)
	dst.Annotations = withoutAnnotation(dst.Annotations, UncheckedIdentityAnnotation) // ToHub marks again

	// The kept v1alpha1 spec is used only while it still means the current
	// v1beta1 spec; after an edit through v1beta1 the canonical form is shown.
	if alphaSpec != nil && semanticEqual(NormalizeSpec(alphaSpec), src.Spec) {
		dst.Spec = *alphaSpec
	} else {
		dst.Spec = DenormalizeSpec(&src.Spec)
	}
	dst.Status.Phase = PhaseFromConditions(src.Status.Conditions)

	var lost hubData
	if !semanticEqual(NormalizeSpec(&dst.Spec), src.Spec) {
		lost.Spec = src.Spec.DeepCopy()
	}
	if !semanticEqual(StatusFromPhase(dst.Status.Phase, src.CreationTimestamp), src.Status) {
		lost.Status = src.Status.DeepCopy()
	}
	if lost.Spec != nil || lost.Status != nil {
		dst.Annotations = withAnnotation(dst.Annotations, HubDataAnnotation, lost)
	}
}

// semanticEqual compares as the API server does: nil and empty are the same.
func semanticEqual(a, b any) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// Annotation values longer than compressAbove are written compressed:
// compressedPrefix and the base64 of their gzipped JSON. The API server
// keeps all of an object's annotations within 256 KiB, also in what a
// conversion returns; a status records about 60 kB of addresses per backend
// set at 5,000 nodes, so a resource of more than 3 backend sets could not
// be read as v1alpha1 with its status kept in plain JSON.
const (
	compressedPrefix = "gzip:"
	compressAbove    = 16 << 10
	// maxAnnotationJSON bounds what a compressed value may expand to: more
	// than an object may contain in etcd, so no value conversion wrote, and a
	// limit on what a forged one costs to read.
	maxAnnotationJSON = 4 << 20
)

// decodeAnnotation reads a JSON annotation, or returns nil when it is missing
// or unreadable: conversion must not fail on what a user may have typed into
// metadata.
func decodeAnnotation[T any](annotations map[string]string, key string) *T {
	raw, ok := annotations[key]
	if !ok {
		return nil
	}
	data := []byte(raw)
	if packed, ok := strings.CutPrefix(raw, compressedPrefix); ok {
		var err error
		if data, err = decompress(packed); err != nil {
			return nil
		}
	}
	v := new(T)
	if json.Unmarshal(data, v) != nil {
		return nil
	}
	return v
}

func decompress(packed string) ([]byte, error) {
	size, ok := declaredSize(packed)
	if !ok {
		return nil, errors.New("compressed annotation declares no size within its limit")
	}
	zr, err := gzip.NewReader(base64.NewDecoder(base64.StdEncoding, strings.NewReader(packed)))
	if err != nil {
		return nil, err
	}
	zr.Multistream(false)
	// gzip checks the size its trailer declares once it reads to the end, so
	// a value expands to exactly what declaredSize said or is unreadable.
	data, err := io.ReadAll(io.LimitReader(zr, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > size {
		return nil, errors.New("compressed annotation expands past its declared size")
	}
	return data, nil
}

// declaredSize is the size a compressed value says it expands to: the last
// four bytes of a gzip member (RFC 1952, ISIZE), read without expanding
// anything, so what reading a value would cost is known before it is paid.
// It is not ok when the value declares none, or more than
// maxAnnotationJSON: such a value is never expanded.
func declaredSize(packed string) (int64, bool) {
	if len(packed) < 8 || len(packed)%4 != 0 {
		return 0, false
	}
	tail, err := base64.StdEncoding.DecodeString(packed[len(packed)-8:])
	if err != nil || len(tail) < 4 {
		return 0, false
	}
	size := int64(binary.LittleEndian.Uint32(tail[len(tail)-4:]))
	return size, size <= maxAnnotationJSON
}

// ExpandedSize is how many bytes reading the conversion annotation key of
// annotations expands to beyond its own length: what its compressed value
// declares, or 0 when it is plain, missing, or would not be expanded at all.
// Conversion reads HubDataAnnotation of v1alpha1 objects and
// AlphaSpecAnnotation of v1beta1 objects.
func ExpandedSize(annotations map[string]string, key string) int64 {
	packed, ok := strings.CutPrefix(annotations[key], compressedPrefix)
	if !ok {
		return 0
	}
	if size, ok := declaredSize(packed); ok {
		return size
	}
	return 0
}

// withAnnotation sets key to the JSON of value in annotations, which the
// caller owns, compressed when it is long. The same value always gives the
// same text, so a value read and sent back unchanged is recognized as such.
func withAnnotation(annotations map[string]string, key string, value any) map[string]string {
	raw, err := json.Marshal(value)
	if err != nil {
		panic(err) // only plain API structs are marshalled here
	}
	text := string(raw)
	if len(raw) > compressAbove {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level
		_, _ = zw.Write(raw)                                     // into memory
		_ = zw.Close()
		text = compressedPrefix + base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = text
	return annotations
}

// withoutAnnotation removes key from annotations, which the caller owns.
func withoutAnnotation(annotations map[string]string, key string) map[string]string {
	delete(annotations, key)
	if len(annotations) == 0 {
		return nil
	}
	return annotations
}
