package v1alpha1

import (
	"fmt"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// roundTrips is how many random objects each direction is checked with.
const roundTrips = 10_000

// spokeRoundTrip converts a stored v1alpha1 object to the hub and back,
// storing each result as the API server would, and returns the difference.
func spokeRoundTrip(t testing.TB, in *LBRegistrar) string {
	in.APIVersion, in.Kind = GroupVersion.String(), "LBRegistrar"
	in = stored(t, in)
	var hub v1beta1.LBRegistrar
	ToHub(in, &hub)
	if diff := metadataDiff(in.ObjectMeta, hub.ObjectMeta); diff != "" {
		return diff
	}
	var out LBRegistrar
	FromHub(stored(t, &hub), &out)
	return cmp.Diff(in, stored(t, &out), cmpOptions...)
}

// hubRoundTrip converts a stored v1beta1 object to v1alpha1 and back. An
// identity other than an API key comes back marked unchecked
// (UncheckedIdentityAnnotation): on the way back conversion cannot tell it
// from one planted in HubDataAnnotation before lbregistrar was installed.
func hubRoundTrip(t testing.TB, in *v1beta1.LBRegistrar) string {
	in.APIVersion, in.Kind = v1beta1.GroupVersion.String(), "LBRegistrar"
	in = stored(t, in)
	var spoke LBRegistrar
	FromHub(in, &spoke)
	if diff := metadataDiff(in.ObjectMeta, spoke.ObjectMeta); diff != "" {
		return diff
	}
	if len(in.Spec.Services) > 0 && len(NormalizeSpec(&spoke.Spec).Services) == 0 {
		return fmt.Sprintf("the v1alpha1 view of %d targets has none: %+v", len(in.Spec.Services), spoke.Spec)
	}
	var out v1beta1.LBRegistrar
	ToHub(stored(t, &spoke), &out)
	if in.Spec.APIKey == nil {
		in.Annotations = maps.Clone(in.Annotations)
		if in.Annotations == nil {
			in.Annotations = map[string]string{}
		}
		in.Annotations[UncheckedIdentityAnnotation] = in.Spec.Identity()
	}
	return cmp.Diff(in, stored(t, &out), cmpOptions...)
}

// metadataDiff reports a change to metadata other than annotations, which a
// conversion webhook may not make.
func metadataDiff(in, out metav1.ObjectMeta) string {
	return cmp.Diff(in, out, append(cmpOptions, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "Annotations"))...)
}

func TestRoundTripSpokeHubSpoke(t *testing.T) {
	t.Parallel()
	filler := newFiller(1)
	for i := range roundTrips {
		in := &LBRegistrar{}
		filler.Fill(in)
		if diff := spokeRoundTrip(t, in); diff != "" {
			t.Fatalf("object %d changed on v1alpha1 -> v1beta1 -> v1alpha1 (-in +out):\n%s", i, diff)
		}
	}
}

func TestRoundTripHubSpokeHub(t *testing.T) {
	t.Parallel()
	filler := newFiller(2)
	for i := range roundTrips {
		in := &v1beta1.LBRegistrar{}
		filler.Fill(in)
		if diff := hubRoundTrip(t, in); diff != "" {
			t.Fatalf("object %d changed on v1beta1 -> v1alpha1 -> v1beta1 (-in +out):\n%s", i, diff)
		}
	}
}

// FuzzConvert lets the coverage-guided fuzzer pick the objects: its input
// drives the same fill functions as the round trips above, in both directions.
func FuzzConvert(f *testing.F) {
	for _, seed := range []string{"", "services", "\x00\x01\x02\x03\x04\x05\x06\x07", "port and nodePort, weight 0"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		filler := randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 3).Funcs(fillFuncs()...)
		spoke := &LBRegistrar{}
		filler.Fill(spoke)
		if diff := spokeRoundTrip(t, spoke); diff != "" {
			t.Fatalf("v1alpha1 -> v1beta1 -> v1alpha1 (-in +out):\n%s", diff)
		}
		hub := &v1beta1.LBRegistrar{}
		filler.Fill(hub)
		if diff := hubRoundTrip(t, hub); diff != "" {
			t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1 (-in +out):\n%s", diff)
		}
	})
}
