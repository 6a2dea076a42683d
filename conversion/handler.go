package conversion

import (
	"bufio"
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
//     then copies and re-validates its JSON; past spillAt the response is
//     streamed, and converted objects are not kept.
//
// Its work is bounded before it is done: every object is decoded and
// checked first, and a review whose compressed annotations would expand
// past its budget (reviewExpansionBase, reviewExpansionRatio) is refused
// with an error that says so.
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

// A review's compressed annotations may expand to reviewExpansionBase plus
// reviewExpansionRatio times the review's own size. The base lets a write
// (one object, whose annotation expands to at most 4 MiB) and any small
// list through; the ratio, a list of what conversion writes, which
// compresses about 4 to 1 (node addresses) and seldom past 30 to 1 (many
// equal backend sets), but not gzip's 1,000 to 1 of a crafted value. Past
// it, the review is refused before anything is expanded.
const (
	reviewExpansionBase  = 16 << 20
	reviewExpansionRatio = 32
)

// spillAt is how much of a response is buffered before it is sent: a review
// that fails within it gets a clean failure response; a longer one is
// streamed, so that memory does not grow with the answer.
const spillAt = 1 << 20

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
	sent := &countingWriter{w: w}
	out := bufio.NewWriterSize(sent, spillAt)
	err := h.convert(r.Context(), review, body.n, out)
	if err != nil && sent.n == 0 {
		log.Error(err, "failed to convert", "request", review.Request.UID)
		out.Reset(w)
		review.Response = &apix.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}
		review.Request = nil
		if err := json.NewEncoder(out).Encode(review); err != nil {
			log.Error(err, "failed to write response")
			return
		}
	} else if err != nil {
		// Part of the answer is out: what follows cannot be read as a
		// review, so the API server fails the conversion.
		log.Error(err, "failed to convert after part of the response was sent", "request", review.Request.UID)
		return
	}
	if err := out.Flush(); err != nil {
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

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// source is one object of a review, decoded, and the empty object it
// converts into.
type source struct {
	src, dst runtime.Object
}

// convert writes the successful response to review, read from size bytes,
// into out: the review's own kind and apiVersion, the request's UID, the
// converted objects in order. Every object is decoded and checked first,
// and the review's expansion budget with it, so that what is refused is
// refused before any output.
func (h *handler) convert(ctx context.Context, review *apix.ConversionReview, size int64, out io.Writer) (err error) {
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
	sources, err := h.decodeAll(req, size)
	if err != nil {
		return err
	}
	typeMeta, err := json.Marshal(review.TypeMeta) // {} or {"kind":…,"apiVersion":…}
	if err != nil {
		return err
	}
	uid, err := json.Marshal(req.UID)
	if err != nil {
		return err
	}
	head := typeMeta[:len(typeMeta)-1]
	if len(typeMeta) > len("{}") {
		head = append(head, ',')
	}
	if _, err := fmt.Fprintf(out, `%s"response":{"uid":%s,"convertedObjects":[`, head, uid); err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for i := range sources {
		if err := h.converter.ConvertObject(ctx, sources[i].src, sources[i].dst); err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(out, ","); err != nil {
				return err
			}
		}
		if err := enc.Encode(sources[i].dst); err != nil {
			return err
		}
		sources[i] = source{} // converted objects are not kept
	}
	_, err = io.WriteString(out, `],"result":{"metadata":{},"status":"Success"}}}`+"\n")
	return err
}

// decodeAll decodes and checks every object of req, read from size bytes,
// and refuses the review when their compressed annotations would expand
// past its budget.
func (h *handler) decodeAll(req *apix.ConversionRequest, size int64) ([]source, error) {
	sources := make([]source, len(req.Objects))
	var expanded int64
	for i, obj := range req.Objects {
		src, gvk, err := h.decode(req.DesiredAPIVersion, obj.Raw)
		if err != nil {
			return nil, err
		}
		req.Objects[i].Raw = nil // decoded
		dst, err := h.newObject(schema.FromAPIVersionAndKind(req.DesiredAPIVersion, gvk.Kind))
		if err != nil {
			return nil, err
		}
		srcGVK, dstGVK := src.GetObjectKind().GroupVersionKind(), dst.GetObjectKind().GroupVersionKind()
		if srcGVK.GroupKind() != dstGVK.GroupKind() {
			return nil, fmt.Errorf("src %T and dst %T does not belong to same API Group", src, dst)
		}
		if srcGVK == dstGVK {
			return nil, fmt.Errorf("conversion is not allowed between same type %T", src)
		}
		expanded += expandedSize(src)
		sources[i] = source{src: src, dst: dst}
	}
	if budget := reviewExpansionBase + reviewExpansionRatio*size; expanded > budget {
		return nil, fmt.Errorf("the compressed annotations of the review's %d objects expand to %d bytes, more than the %d a review of %d bytes may: "+
			"convert fewer objects at a time (list in pages, e.g. kubectl get --chunk-size)", len(sources), expanded, budget, size)
	}
	return sources, nil
}

// expandedSize is what converting obj expands of its annotations.
func expandedSize(obj runtime.Object) int64 {
	switch obj := obj.(type) {
	case *v1alpha1.LBRegistrar:
		return v1alpha1.ExpandedSize(obj.Annotations, v1alpha1.HubDataAnnotation)
	case *v1beta1.LBRegistrar:
		return v1alpha1.ExpandedSize(obj.Annotations, v1alpha1.AlphaSpecAnnotation)
	}
	return 0
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
