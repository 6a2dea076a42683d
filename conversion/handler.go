package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	conversionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/conversion/metrics"
	kjson "sigs.k8s.io/json"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// NewHandler serves ConversionReviews of LBRegistrars with converter. It
// answers as controller-runtime's conversion webhook handler does (the same
// objects, statuses and errors) with less work on the way, which matters
// when the API server converts a whole list in one review:
//
//   - an object is decoded once, straight into the version it must be in
//     (the one that is not the desired one: the API server sends only
//     objects that need converting, and the CRD has two versions), where
//     the generic path reads its apiVersion and kind first in a pass of its
//     own; anything else takes the generic path;
//   - converted objects are encoded straight into the response, where
//     encoding a ConversionReview of RawExtensions encodes each object and
//     then copies and re-validates its JSON.
func NewHandler(scheme *runtime.Scheme, converter crconversion.Converter) http.Handler {
	return &handler{scheme: scheme, converter: converter, decoder: crconversion.NewDecoder(scheme)}
}

type handler struct {
	scheme    *runtime.Scheme
	converter crconversion.Converter
	decoder   *crconversion.Decoder
}

var log = logf.Log.WithName("conversion-webhook")

// sourceOf is, by desired apiVersion, the version objects to convert come
// in and its empty object.
var sourceOf = map[string]struct {
	gvk       schema.GroupVersionKind
	newObject func() runtime.Object
}{
	v1beta1.GroupVersion.String():  {v1alpha1.GroupVersion.WithKind("LBRegistrar"), func() runtime.Object { return &v1alpha1.LBRegistrar{} }},
	v1alpha1.GroupVersion.String(): {v1beta1.GroupVersion.WithKind("LBRegistrar"), func() runtime.Object { return &v1beta1.LBRegistrar{} }},
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := &apix.ConversionReview{}
	body := &countingReader{r: r.Body}
	if err := json.NewDecoder(body).Decode(review); err != nil {
		log.Error(err, "failed to read conversion request")
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		log.Error(nil, "conversion request is nil")
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	// The response is about as large as the request: sized from the bytes
	// read, never from the Content-Length a caller claims.
	var out bytes.Buffer
	out.Grow(int(body.n))
	if err := h.convert(r.Context(), review, &out); err != nil {
		log.Error(err, "failed to convert", "request", review.Request.UID)
		out.Reset()
		review.Response = &apix.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}
		review.Request = nil
		if err := json.NewEncoder(&out).Encode(review); err != nil {
			log.Error(err, "failed to write response")
			return
		}
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		log.Error(err, "failed to write response")
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// convert writes the successful response to review into out: the review's
// own kind and apiVersion, the request's UID, the converted objects in
// order.
func (h *handler) convert(ctx context.Context, review *apix.ConversionReview, out *bytes.Buffer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			conversionmetrics.WebhookPanics.WithLabelValues().Inc()
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, r)
			}
			err = errors.New("internal error occurred during conversion")
		}
	}()
	req := review.Request
	typeMeta, err := json.Marshal(review.TypeMeta) // {} or {"kind":…,"apiVersion":…}
	if err != nil {
		return err
	}
	uid, err := json.Marshal(req.UID)
	if err != nil {
		return err
	}
	out.Write(typeMeta[:len(typeMeta)-1])
	if len(typeMeta) > len("{}") {
		out.WriteByte(',')
	}
	out.WriteString(`"response":{"uid":`)
	out.Write(uid)
	out.WriteString(`,"convertedObjects":[`)
	enc := json.NewEncoder(out)
	for i, obj := range req.Objects {
		src, gvk, err := h.decode(req.DesiredAPIVersion, obj.Raw)
		if err != nil {
			return err
		}
		dst, err := h.newObject(schema.FromAPIVersionAndKind(req.DesiredAPIVersion, gvk.Kind))
		if err != nil {
			return err
		}
		if err := h.convertObject(ctx, src, dst); err != nil {
			return err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		if err := enc.Encode(dst); err != nil {
			return err
		}
	}
	out.WriteString(`],"result":{"metadata":{},"status":"Success"}}}` + "\n")
	return nil
}

// decode reads one object and its kind.
func (h *handler) decode(desiredAPIVersion string, raw []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	if source, ok := sourceOf[desiredAPIVersion]; ok {
		src := source.newObject()
		if kjson.UnmarshalCaseSensitivePreserveInts(raw, src) == nil && src.GetObjectKind().GroupVersionKind() == source.gvk {
			return src, &source.gvk, nil
		}
	}
	return h.decoder.Decode(raw)
}

// newObject is an empty object of gvk that says its apiVersion and kind.
func (h *handler) newObject(gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := h.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

func (h *handler) convertObject(ctx context.Context, src, dst runtime.Object) error {
	srcGVK, dstGVK := src.GetObjectKind().GroupVersionKind(), dst.GetObjectKind().GroupVersionKind()
	if srcGVK.GroupKind() != dstGVK.GroupKind() {
		return fmt.Errorf("src %T and dst %T does not belong to same API Group", src, dst)
	}
	if srcGVK == dstGVK {
		return fmt.Errorf("conversion is not allowed between same type %T", src)
	}
	return h.converter.ConvertObject(ctx, src, dst)
}
