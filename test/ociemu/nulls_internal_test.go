package ociemu

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
)

// withoutNullMembers is the plain statement of what dropNullMembers does:
// decoded, every object's null members deleted, arrays left as they are.
func withoutNullMembers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, member := range v {
			if member == nil {
				delete(v, k)
			} else {
				v[k] = withoutNullMembers(member)
			}
		}
	case []any:
		for i := range v {
			v[i] = withoutNullMembers(v[i])
		}
	}
	return v
}

func FuzzDropNullMembers(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `"s"`, `{"a":null}`, `{"a":null,"b":1}`, `{"a":1,"b":null}`, `{"a":1,"b":null,"c":2}`,
		`{"a":{"b":null},"c":[null,{"d":null,"e":[]}]}`, `[null,{"a":null}]`, `{"k\"ey":null,"x":"v\\"}`,
		`{"a":"null","b":"x:null","c":null}`, `{"":null,"":1}`, `{"a":{"b":null}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		compact, err := json.Marshal(v) // what dropNullMembers gets: json.Marshal's output
		if err != nil {
			return
		}
		var want, got any
		_ = json.Unmarshal(compact, &want)
		out := dropNullMembers(compact)
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s became %s: %v", compact, out, err)
		}
		if diff := cmp.Diff(withoutNullMembers(want), got); diff != "" {
			t.Fatalf("%s became %s (-want +got):\n%s", compact, out, diff)
		}
	})
}

func TestMarshalWithoutNullsDropsUnsetFields(t *testing.T) {
	data, err := marshalWithoutNulls(loadbalancer.Backend{Name: common.String("10.0.0.1:80"), Port: common.Int(80)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"name":"10.0.0.1:80","port":80}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
