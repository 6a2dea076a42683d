package v1beta1

import (
	"cmp"
	"slices"
)

// Owned lists the backends the record keeps, one per address and port,
// ordered by address, then port.
func (s *BackendSetStatus) Owned() []Backend {
	var out []Backend
	for _, g := range s.Backends {
		if g.IP != "" {
			out = append(out, Backend{IP: g.IP, Port: g.Port, Weight: g.Weight})
		}
		for _, ip := range g.IPs {
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
		if g.IP != "" {
			n++
		}
		n += len(g.IPs)
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
	for _, b := range sorted {
		if n := len(groups); n > 0 && groups[n-1].Port == b.Port && groups[n-1].Weight == b.Weight {
			groups[n-1].IPs = append(groups[n-1].IPs, b.IP)
			continue
		}
		groups = append(groups, BackendGroup{Port: b.Port, Weight: b.Weight, IPs: []string{b.IP}})
	}
	return groups
}

// CompareBackends orders backends by address, then port.
func CompareBackends(a, b Backend) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
}
