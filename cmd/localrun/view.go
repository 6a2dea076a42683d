package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// showOperations prints the write lanes and the registered-backends metric
// of the running lbregistrar, as an operator would look at them.
func showOperations(metricsAddr string) error {
	lanes, err := get("http://" + metricsAddr + "/debug/lanes")
	if err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(lanes)); err != nil {
		return fmt.Errorf("/debug/lanes: %w", err)
	}
	fmt.Printf("\nGET /debug/lanes: %s\n", compact.String())
	metrics, err := get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "lbregistrar_backends_registered{") {
			fmt.Println(line)
		}
	}
	return nil
}

// render shows every backend set of the emulated load balancers and every
// LBRegistrar's conditions, and reports whether all the resources applied are
// Ready with their recorded backends present in OCI.
func render(ctx context.Context, c client.Client, emu *ociemu.Emulator, resources int) (string, bool, error) {
	var b strings.Builder
	state := emu.State()
	type set struct{ lb, kind, name string }
	var sets []set
	for _, lb := range state.LoadBalancers {
		for name := range lb.BackendSets {
			sets = append(sets, set{*lb.Id, "load balancer", name})
		}
	}
	for _, lb := range state.NetworkLoadBalancers {
		for name := range lb.BackendSets {
			sets = append(sets, set{*lb.Id, "network load balancer", name})
		}
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].lb+sets[i].name < sets[j].lb+sets[j].name })
	registered := map[string]bool{} // "lb/set/ip:port"
	lastLB := ""
	for _, s := range sets {
		if s.lb != lastLB {
			fmt.Fprintf(&b, "%s %s (%s)\n", s.kind, shortOCID(s.lb), emu.LifecycleState(s.lb))
			lastLB = s.lb
		}
		backends, err := emu.Backends(s.lb, s.name)
		if err != nil {
			return "", false, err
		}
		var shown []string
		for _, be := range backends {
			addr := net.JoinHostPort(be.IPAddress, strconv.Itoa(be.Port))
			registered[s.lb+"/"+s.name+"/"+addr] = true
			flags := ""
			if be.Drain {
				flags = " drain"
			}
			shown = append(shown, fmt.Sprintf("%s w%d%s", addr, be.Weight, flags))
		}
		fmt.Fprintf(&b, "  %-13s %s\n", s.name, strings.Join(shown, ", "))
	}

	var list v1beta1.LBRegistrarList
	if err := c.List(ctx, &list); err != nil {
		return "", false, err
	}
	allReady := len(list.Items) == resources
	b.WriteString("\nLBRegistrar                 Ready  Degraded  Conflict  registered  healthy\n")
	for _, r := range list.Items {
		ready := meta.IsStatusConditionTrue(r.Status.Conditions, v1beta1.ConditionReady) && r.Status.ObservedGeneration == r.Generation
		count := 0
		for _, bs := range r.Status.BackendSets {
			for _, be := range bs.Owned() {
				count++
				if !registered[r.Spec.LoadBalancerID+"/"+bs.Name+"/"+net.JoinHostPort(be.IP, strconv.Itoa(int(be.Port)))] {
					ready = false
				}
			}
		}
		if count == 0 {
			ready = false
		}
		allReady = allReady && ready
		healthy := r.Status.Healthy
		if healthy == "" {
			healthy = "-"
		}
		fmt.Fprintf(&b, "%-27s %-6s %-9s %-9s %-11s %s\n", r.Name, condition(r, v1beta1.ConditionReady),
			condition(r, v1beta1.ConditionDegraded), condition(r, v1beta1.ConditionConflict), fmt.Sprintf("%d backends", count), healthy)
		for _, bs := range r.Status.BackendSets {
			if h := bs.Health; h != nil {
				fmt.Fprintf(&b, "    %s: %d OK, %d warning, %d critical, %d unknown of its own; OCI says the set is %s\n",
					bs.Name, h.OK, h.Warning, h.Critical, h.Unknown, h.Status)
			}
		}
		for _, cond := range r.Status.Conditions {
			if cond.Status == metav1.ConditionTrue && cond.Type != v1beta1.ConditionReady || cond.Type == v1beta1.ConditionReady && cond.Status != metav1.ConditionTrue {
				fmt.Fprintf(&b, "    %s %s: %s\n", cond.Type, cond.Reason, cond.Message)
			}
		}
	}
	return b.String(), allReady, nil
}

func condition(r v1beta1.LBRegistrar, typ string) string {
	if c := meta.FindStatusCondition(r.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return "-"
}

func shortOCID(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 && len(id)-i > 12 {
		return id[:strings.IndexByte(id, '.')+1] + "…" + id[len(id)-12:]
	}
	return id
}
