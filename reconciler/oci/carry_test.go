package oci_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// filler sets every field of an SDK read shape that its write shape can set
// (matched by JSON name, nested structs and backends included) to a value
// no service default has. It works by reflection, so a field a newer SDK
// adds is filled as well, and TestWriteCarriesEveryOtherSetting fails until
// the adapter carries it.
type filler struct {
	t *testing.T
	// values are what fields whose values the service checks, or whose
	// default would be the obvious pick, get, by JSON path.
	values map[string]any
	// skip lists JSON paths left unset: settings that exclude each other.
	skip []string
	n    int
}

func (f *filler) fill(v reflect.Value, write reflect.Type, path string) {
	for i := range v.NumField() {
		name := jsonName(v.Type().Field(i))
		w, settable := fieldByJSON(write, name)
		p := strings.TrimPrefix(path+"."+name, ".")
		if name == "" || !settable || slices.Contains(f.skip, p) {
			continue
		}
		f.value(v.Field(i), w.Type, p)
	}
}

func (f *filler) value(v reflect.Value, write reflect.Type, path string) {
	if val, ok := f.values[path]; ok && v.Kind() != reflect.Pointer && v.Kind() != reflect.Slice {
		v.Set(reflect.ValueOf(val).Convert(v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.value(p.Elem(), indirect(write), path)
		v.Set(p)
	case reflect.Struct:
		f.fill(v, indirect(write), path)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("v-" + path))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		f.value(s.Index(0), indirect(write).Elem(), path)
		v.Set(s)
	case reflect.String:
		if v.Type().PkgPath() != "" {
			f.t.Fatalf("%s is an enum (%s): give it a valid value in filler.values", path, v.Type())
		}
		v.SetString("v-" + path)
	case reflect.Int:
		f.n++
		v.SetInt(int64(10 + f.n))
	case reflect.Bool:
		v.SetBool(true)
	default:
		f.t.Fatalf("%s: cannot fill a %s", path, v.Kind())
	}
}

func indirect(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

func fieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// filled returns a T (an SDK read shape) with every field its write shape W
// can set filled by f.
func filled[T, W any](f *filler) T {
	var v T
	f.fill(reflect.ValueOf(&v).Elem(), reflect.TypeFor[W](), "")
	return v
}

// Every setting of a backend set and every field of a backend kept, each
// with a value no default has, survives a write that adds a backend and one
// that takes it out again, byte for byte.
func TestWriteCarriesEveryOtherSetting(t *testing.T) {
	classicValues := map[string]any{
		"policy": "LEAST_CONNECTIONS", "healthChecker.protocol": "HTTP", "backends.ipAddress": "192.168.9.9",
		"backendMaxConnections": 300, "backends.maxConnections": 400,
		"sslConfiguration.serverOrderPreference": "DISABLED",
	}
	networkValues := map[string]any{
		"policy": "TWO_TUPLE", "ipVersion": "IPV6", "backends.ipAddress": "fd00::9:9",
		"isPreserveSource": false, "isInstantFailoverTcpResetEnabled": false,
		"healthChecker.protocol": "DNS", "healthChecker.dns.transportProtocol": "TCP", "healthChecker.dns.queryClass": "CH",
		"healthChecker.dns.queryType": "AAAA", "healthChecker.dns.rcodes": "NXDOMAIN",
	}
	tests := []struct {
		name  string
		seed  func(*testing.T) ociemu.Seed
		lb    string
		added plan.Backend
	}{
		{"classic with session persistence", func(t *testing.T) ociemu.Seed {
			f := &filler{t: t, values: classicValues, skip: []string{"lbCookieSessionPersistenceConfiguration"}}
			return classicSeed(filled[loadbalancer.BackendSet, loadbalancer.UpdateBackendSetDetails](f))
		}, "ocid1.loadbalancer.oc1.iad.everysetting", plan.Backend{IP: "10.9.9.9", Port: 31000, Weight: 1}},
		{"classic with load balancer cookie persistence", func(t *testing.T) ociemu.Seed {
			f := &filler{t: t, values: classicValues, skip: []string{"sessionPersistenceConfiguration"}}
			return classicSeed(filled[loadbalancer.BackendSet, loadbalancer.UpdateBackendSetDetails](f))
		}, "ocid1.loadbalancer.oc1.iad.everysetting", plan.Backend{IP: "10.9.9.9", Port: 31000, Weight: 1}},
		{"network", func(t *testing.T) ociemu.Seed {
			f := &filler{t: t, values: networkValues}
			set := filled[networkloadbalancer.BackendSet, networkloadbalancer.UpdateBackendSetDetails](f)
			return ociemu.Seed{NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{
				Id: common.String("ocid1.networkloadbalancer.oc1.iad.everysetting"), BackendSets: map[string]networkloadbalancer.BackendSet{"all": set}}}}
		}, "ocid1.networkloadbalancer.oc1.iad.everysetting", plan.Backend{IP: "fd00::99", Port: 31000, Weight: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			emu, c := emulatorClient(t, true)
			if err := emu.SeedState(tc.seed(t)); err != nil {
				t.Fatal(err)
			}
			before := backendSets(t, emu, tc.lb)
			bs, err := c.GetBackendSet(ctx, tc.lb, "all")
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.UpdateBackendSet(ctx, bs, append(slices.Clone(bs.Backends), tc.added), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.WaitWorkRequest(ctx, tc.lb, id); err != nil {
				t.Fatal(err)
			}
			if bs, err = c.GetBackendSet(ctx, tc.lb, "all"); err != nil {
				t.Fatal(err)
			}
			id, err = c.UpdateBackendSet(ctx, bs, bs.Backends[:len(bs.Backends)-1], "")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.WaitWorkRequest(ctx, tc.lb, id); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, backendSets(t, emu, tc.lb)); d != "" {
				t.Fatalf("state changed (-before +after):\n%s", d)
			}
		})
	}
}

func classicSeed(set loadbalancer.BackendSet) ociemu.Seed {
	return ociemu.Seed{LoadBalancers: []loadbalancer.LoadBalancer{{
		Id: common.String("ocid1.loadbalancer.oc1.iad.everysetting"), BackendSets: map[string]loadbalancer.BackendSet{"all": set}}}}
}
