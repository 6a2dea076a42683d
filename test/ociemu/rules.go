package ociemu

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// OCI's documented rules on the values a client writes to backend sets,
// each with its source; docs/oci-emulator.md lists them. Where a source
// speaks of one service only, the other is checked against it too, so that a
// client the emulator accepts is right under either reading.
const (
	// OCI docs, Overview of Load Balancer, "Limits on Load Balancing
	// Resources": "512 backend servers per backend set", "512 backend
	// servers total".
	classicBackendsPerSet      = 512
	classicBackendsPerBalancer = 512
	// OCI docs, Overview of Flexible Network Load Balancing, "Limits on
	// Network Load Balancers": "512 backend servers per backend set", "1024
	// backend servers total".
	networkBackendsPerSet      = 512
	networkBackendsPerBalancer = 1024
	// OCI docs, Backend Sets for Network Load Balancers: "A Non-preemption
	// mode backend set only has a maximum of two backend servers" (SDK
	// areOperationallyActiveBackendsPreferred).
	nonPreemptiveBackends = 2
	// OCI docs, Overview of Flexible Network Load Balancing: "Weight values
	// must be from 1 to 100"; the classic pages give no range.
	minWeight, maxWeight = 1, 100
	// SDK BackendDetails.MaxConnections and BackendSetDetails.
	// BackendMaxConnections: "If setting maxConnections to some value other
	// than 0 then that value must be greater or equal to 256".
	minMaxConnections = 256
)

// backendSetNameRule: SDK BackendSet.Name of both services: "Valid backend
// set names include only alphanumeric characters, dashes, and underscores."
// Only seeds name backend sets; requests naming another find none (404).
func backendSetNameRule(name string) error {
	if name == "" || strings.TrimFunc(name, func(r rune) bool {
		return r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}) != "" {
		return fmt.Errorf("backend set name %q contains other than letters, digits, '-' and '_'", name)
	}
	return nil
}

// backendRules are the rules on one backend's values, for both services.
func backendRules(weight, maxConnections *int) *apiError {
	if w := deref(weight); weight != nil && (w < minWeight || w > maxWeight) {
		return invalidParameter("weight " + strconv.Itoa(w) + " is not from 1 to 100")
	}
	if c := deref(maxConnections); c != 0 && c < minMaxConnections {
		return invalidParameter("maxConnections " + strconv.Itoa(c) + " must be 0 (unlimited) or at least 256")
	}
	return nil
}

// classicBackendRules adds what the Load Balancing service alone requires:
// an IPv4 address ("Load Balancer support for IPv6 doesn't include backend
// servers", OCI docs, Overview of Load Balancer, IPv6 Support) and a port.
func classicBackendRules(be *loadbalancer.Backend) *apiError {
	if err := backendRules(be.Weight, be.MaxConnections); err != nil {
		return err
	}
	addr, err := netip.ParseAddr(*be.IpAddress)
	if err != nil || !addr.Unmap().Is4() {
		return invalidParameter("ipAddress " + *be.IpAddress + " is not an IPv4 address; load balancer backends are IPv4")
	}
	if p := *be.Port; p < 1 || p > 65535 {
		return invalidParameter("port " + strconv.Itoa(p) + " is not from 1 to 65535")
	}
	return nil
}

// classicSetRules are the rules on a classic backend set as a whole.
func classicSetRules(set *loadbalancer.BackendSet) *apiError {
	if c := deref(set.BackendMaxConnections); c != 0 && c < minMaxConnections {
		return invalidParameter("backendMaxConnections " + strconv.Itoa(c) + " must be 0 (unlimited) or at least 256")
	}
	if deref(set.Policy) == "IP_HASH" {
		// SDK BackendDetails.Backup: "You cannot add a backend server
		// marked as `backup` to a backend set that uses the IP Hash policy."
		for _, be := range set.Backends {
			if deref(be.Backup) {
				return invalidParameter("backend " + *be.Name + " is marked backup in a backend set with the IP_HASH policy")
			}
		}
	}
	return nil
}

// networkSetRules are the rules on an NLB backend set as a whole, in an
// NLB that preserves source and destination or not.
func networkSetRules(set *networkloadbalancer.BackendSet, preservesSourceDestination bool) *apiError {
	// SDK UpdateBackendSetDetails.IsPreserveSource: "If the
	// isPreserveSourceDestination parameter is enabled for the network load
	// balancer resource, then this parameter cannot be disabled."
	if preservesSourceDestination && set.IsPreserveSource != nil && !*set.IsPreserveSource {
		return invalidParameter("isPreserveSource cannot be false in a network load balancer that preserves source and destination")
	}
	for _, be := range set.Backends {
		// SDK HealthCheckerDetails.Port: "The port must be specified if
		// the backend port is 0."
		if deref(be.Port) == 0 && (set.HealthChecker == nil || set.HealthChecker.Port == nil) {
			return invalidParameter("backend " + *be.Name + " has port 0, so healthChecker.port is required")
		}
	}
	return nil
}

// networkBackendPortRule: an NLB backend's port is 0 (any port) to 65535
// (SDK networkloadbalancer.Backend.Name: "`10.0.0.3:0`").
func networkBackendPortRule(port int) *apiError {
	if port < 0 || port > 65535 {
		return invalidParameter("port " + strconv.Itoa(port) + " is not from 0 to 65535")
	}
	return nil
}

// admits checks the named backend set as a write would leave it: the
// rules on it as a whole, then its backend limit (which its mode says) and
// the load balancer's total with the other sets as they are; lower, when
// set, lowers the per-set limit (Options.BackendsPerBackendSet).
func (f family[S, B]) admits(b *balancer, name string, set S, lower int) *apiError {
	if err := f.setRules(b, &set); err != nil {
		return err
	}
	n := len(*f.backends(&set))
	limit := f.perSet(set)
	if lower > 0 && lower < limit {
		limit = lower
	}
	if n > limit {
		return limitExceeded("backend set " + name + " would have " + strconv.Itoa(n) + " backends; the limit is " + strconv.Itoa(limit))
	}
	sets, _ := f.sets(b)
	total := n
	for other, s := range sets {
		if other != name {
			total += len(*f.backends(&s))
		}
	}
	if total > f.perBalancer {
		return limitExceeded("the " + f.kind + " would have " + strconv.Itoa(total) + " backends; the limit is " + strconv.Itoa(f.perBalancer))
	}
	return nil
}

// seeded checks every backend set of a seeded load balancer as admits
// checks a write, so no seed contains what OCI would refuse.
func (f family[S, B]) seeded(b *balancer, field string) error {
	sets, _ := f.sets(b)
	for _, name := range sortedKeys(sets) {
		if err := f.admits(b, name, sets[name], 0); err != nil {
			return fmt.Errorf("%s.backendSets[%s]: %s", field, name, err.message)
		}
	}
	return nil
}
