package lbwatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// listing is a load balancer's work requests as a fake OCI lists them.
type listing map[string][]oci.WorkRequest

func (l listing) WorkRequestsSince(_ context.Context, lb string, _ time.Time) ([]oci.WorkRequest, error) {
	wrs, ok := l[lb]
	if !ok {
		return nil, errors.New("not authorized")
	}
	return wrs, nil
}

// writing lists as rest does, but during its first listing this process's
// write "mine" is accepted, too late for that listing to show it.
type writing struct {
	w       *Watch
	rest    listing
	written bool
}

func (l *writing) WorkRequestsSince(ctx context.Context, lb string, since time.Time) ([]oci.WorkRequest, error) {
	if !l.written {
		l.written = true
		l.w.Own(lb, "mine")
		return nil, nil
	}
	return l.rest.WorkRequestsSince(ctx, lb, since)
}

func ended(id string) oci.WorkRequest    { return oci.WorkRequest{ID: id, Ended: true} }
func inFlight(id string) oci.WorkRequest { return oci.WorkRequest{ID: id} }

// Rounds of the watch over changing listings: which resources each round
// wakes.
func TestWatchWakesOnAnotherWritersChange(t *testing.T) {
	type round struct {
		act   func(w *Watch, l listing) // before the round
		lists listing
		wakes []string
	}
	everyone := func(w *Watch, l listing) {
		w.Keep(context.Background(), "blue-a", "lb1", l)
		w.Keep(context.Background(), "blue-b", "lb1", l)
		w.Keep(context.Background(), "other", "lb2", l)
	}
	for _, tc := range []struct {
		name   string
		rounds []round
	}{
		{name: "the first listing only sets what later ones are compared with", rounds: []round{
			{lists: listing{"lb1": {ended("old")}, "lb2": {}}},
			{lists: listing{"lb1": {ended("old")}, "lb2": {}}},
		}},
		{name: "another writer's ended work request wakes the resources of its load balancer only", rounds: []round{
			{lists: listing{"lb1": {ended("old")}, "lb2": {}}},
			{lists: listing{"lb1": {ended("theirs"), ended("old")}, "lb2": {}}, wakes: []string{"blue-a", "blue-b"}},
			{lists: listing{"lb1": {ended("theirs"), ended("old")}, "lb2": {}}},
		}},
		{name: "a work request in flight wakes when it ends", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{lists: listing{"lb1": {inFlight("theirs")}, "lb2": {}}},
			{lists: listing{"lb1": {ended("theirs")}, "lb2": {}}, wakes: []string{"blue-a", "blue-b"}},
		}},
		{name: "this process's own work requests wake nothing", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, _ listing) { w.Own("lb1", "mine") }, lists: listing{"lb1": {inFlight("mine")}, "lb2": {}}},
			{lists: listing{"lb1": {ended("mine")}, "lb2": {}}},
			{act: func(w *Watch, _ listing) { w.Own("lb2", "mine2") }, lists: listing{"lb1": {ended("mine")}, "lb2": {ended("mine2")}}},
		}},
		{name: "a write accepted while a listing was under way is own", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, l listing) { w.Keep(context.Background(), "blue-a", "lb1", &writing{w: w, rest: l}) }, lists: listing{"lb1": {}, "lb2": {}}},
			{lists: listing{"lb1": {ended("mine")}, "lb2": {}}},
		}},
		{name: "a load balancer first kept is listed at once, so a change right after is noticed", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, l listing) { // "theirs" ends after Keep
				later := l["lb3"]
				l["lb3"] = []oci.WorkRequest{ended("old")}
				w.Keep(context.Background(), "new", "lb3", l)
				l["lb3"] = later
			},
				lists: listing{"lb1": {}, "lb2": {}, "lb3": {ended("theirs"), ended("old")}}, wakes: []string{"new"}},
		}},
		{name: "a forgotten resource is not woken, nor is its load balancer listed", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, _ listing) { w.Forget("blue-b"); w.Forget("other") }, lists: listing{"lb1": {ended("theirs")}}, wakes: []string{"blue-a"}},
		}},
		{name: "a resource moved to another load balancer is woken by that one's changes", rounds: []round{
			{lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, _ listing) {
				w.Keep(context.Background(), "blue-b", "lb2", listing{"lb2": {ended("theirs")}})
			}, lists: listing{"lb1": {ended("x")}, "lb2": {ended("theirs")}},
				wakes: []string{"blue-a", "blue-b", "other"}},
		}},
		{name: "a listing that fails is tried with the next resource's credentials", rounds: []round{
			{act: func(w *Watch, _ listing) { w.Keep(context.Background(), "blue-a", "lb1", listing{}) }, lists: listing{"lb1": {}, "lb2": {}}},
			{act: func(w *Watch, _ listing) { w.Keep(context.Background(), "blue-a", "lb1", listing{}) }, lists: listing{"lb1": {ended("theirs")}, "lb2": {}}, wakes: []string{"blue-a", "blue-b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var woken []string
			w := New(time.Hour, rate.Inf, func(name string) { woken = append(woken, name) })
			lists := listing{}
			everyone(w, lists)
			for i, r := range tc.rounds {
				clear(lists)
				for lb, wrs := range r.lists {
					lists[lb] = wrs
				}
				if r.act != nil {
					r.act(w, lists)
				}
				woken = nil
				w.Round(context.Background())
				slices.Sort(woken)
				if !slices.Equal(woken, r.wakes) {
					t.Errorf("round %d woke %v, want %v", i, woken, r.wakes)
				}
			}
		})
	}
}

// sinces records the bound each listing was asked for.
type sinces struct {
	mu    sync.Mutex
	asked []time.Time
}

func (s *sinces) WorkRequestsSince(_ context.Context, _ string, since time.Time) ([]oci.WorkRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, since)
	return nil, nil
}

// Keep's first listing must be fresh (the caller reads after it); a
// round's listings may be served by any listing made in the round, so one
// listing of a compartment serves its NLBs.
func TestRoundListingsMayShareOneListing(t *testing.T) {
	w := New(time.Hour, rate.Inf, func(string) {})
	l := &sinces{}
	before := time.Now()
	w.Keep(context.Background(), "a", "lb1", l)
	w.Keep(context.Background(), "b", "lb2", l)
	if len(l.asked) != 2 || l.asked[0].Before(before) || l.asked[1].Before(l.asked[0]) {
		t.Fatalf("Keep's listings asked for %v, want each as fresh as its call", l.asked)
	}
	l.asked = nil
	round := time.Now()
	w.Round(context.Background())
	if len(l.asked) != 2 || !l.asked[0].Equal(l.asked[1]) || l.asked[0].Before(round) {
		t.Errorf("a round's listings asked for %v, want one bound, the round's start", l.asked)
	}
}
