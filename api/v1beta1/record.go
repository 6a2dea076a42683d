package v1beta1

import (
	"cmp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Owned lists the backends the record keeps, one per address and port,
// ordered by address, then port.
func (s *BackendSetStatus) Owned() []Backend {
	var out []Backend
	for _, g := range s.Backends {
		for _, ip := range g.addresses() {
			out = append(out, Backend{IP: ip, Port: g.Port, Weight: g.Weight})
		}
	}
	slices.SortFunc(out, CompareBackends)
	return out
}

// OwnedCount is len(Owned()), without listing them.
func (s *BackendSetStatus) OwnedCount() int {
	n := 0
	for _, g := range s.Backends {
		n += len(g.IPs) + countFields(g.Addresses)
		if g.IP != "" {
			n++
		}
	}
	return n
}

// addresses are the group's addresses, in whichever form it stores them.
func (g *BackendGroup) addresses() []string {
	out := slices.Concat(strings.Fields(g.Addresses), g.IPs)
	if g.IP != "" {
		out = append(out, g.IP)
	}
	return out
}

func countFields(s string) int {
	n := 0
	for range strings.FieldsSeq(s) {
		n++
	}
	return n
}

// SetOwned records backends.
func (s *BackendSetStatus) SetOwned(backends []Backend) { s.Backends = GroupBackends(backends) }

// GroupBackends groups backends by port and weight: groups ordered by port,
// then weight, the addresses in each ordered.
func GroupBackends(backends []Backend) []BackendGroup {
	sorted := slices.Clone(backends)
	slices.SortFunc(sorted, func(a, b Backend) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Weight, b.Weight), cmp.Compare(a.IP, b.IP))
	})
	var groups []BackendGroup
	joinRuns(sorted, func(b Backend) string { return b.IP },
		func(a, b Backend) bool { return a.Port == b.Port && a.Weight == b.Weight },
		func(first Backend, addresses string) {
			groups = append(groups, BackendGroup{Port: first.Port, Weight: first.Weight, Addresses: addresses})
		})
	return groups
}

// joinRuns hands emit each run of sorted items that same keeps together:
// its first item and the run's addresses, separated by single spaces.
func joinRuns[T any](sorted []T, address func(T) string, same func(a, b T) bool, emit func(first T, addresses string)) {
	start := 0
	var addresses strings.Builder
	for i, item := range sorted {
		if i > start {
			addresses.WriteByte(' ')
		}
		addresses.WriteString(address(item))
		if next := i + 1; next == len(sorted) || !same(sorted[next], item) {
			emit(sorted[start], addresses.String())
			start, addresses = next, strings.Builder{}
		}
	}
}

// CompareBackends orders backends by address, then port.
func CompareBackends(a, b Backend) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
}

// DrainingBackend is an owned backend marked drain at Since.
type DrainingBackend struct {
	IP    string
	Port  int32
	Since metav1.Time
}

// DrainingBackends lists the backends the record keeps drained.
func (s *BackendSetStatus) DrainingBackends() []DrainingBackend {
	var out []DrainingBackend
	for _, g := range s.Draining {
		for ip := range strings.FieldsSeq(g.Addresses) {
			out = append(out, DrainingBackend{IP: ip, Port: g.Port, Since: g.Since})
		}
	}
	return out
}

// SetDraining records the backends kept drained, grouped by when they were
// marked (to the second, as the record stores it) and port.
func (s *BackendSetStatus) SetDraining(backends []DrainingBackend) {
	sorted := slices.Clone(backends)
	for i := range sorted {
		sorted[i].Since = metav1.NewTime(sorted[i].Since.Truncate(time.Second))
	}
	slices.SortFunc(sorted, func(a, b DrainingBackend) int {
		return cmp.Or(a.Since.Compare(b.Since.Time), cmp.Compare(a.Port, b.Port), cmp.Compare(a.IP, b.IP))
	})
	s.Draining = nil
	joinRuns(sorted, func(b DrainingBackend) string { return b.IP },
		func(a, b DrainingBackend) bool { return a.Since.Equal(&b.Since) && a.Port == b.Port },
		func(first DrainingBackend, addresses string) {
			s.Draining = append(s.Draining, DrainingGroup{Since: first.Since, Port: first.Port, Addresses: addresses})
		})
}
