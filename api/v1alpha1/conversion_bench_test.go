package v1alpha1

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// BenchmarkConvert measures what the conversion webhook adds per object: the
// baseline only decodes and re-encodes the same JSON, which the webhook must
// do anyway; convert decodes v1alpha1, converts it to v1beta1 and encodes that.
func BenchmarkConvert(b *testing.B) {
	for _, n := range []int{1, 1000} {
		objects := make([][]byte, n)
		filler := newFiller(3)
		for i := range objects {
			obj := seedSingleService()
			if i%2 == 1 { // every other object is an arbitrary one
				obj = &LBRegistrar{}
				filler.Fill(obj)
			}
			obj.Name = "lbregistrar-" + strconv.Itoa(i)
			raw, err := json.Marshal(obj)
			if err != nil {
				b.Fatal(err)
			}
			objects[i] = raw
		}
		name := strconv.Itoa(n)
		if n == 1 {
			name = "one"
		}
		b.Run(name+"/baseline", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, raw := range objects {
					var spoke LBRegistrar
					mustUnmarshal(b, raw, &spoke)
					mustMarshal(b, &spoke)
				}
			}
		})
		b.Run(name+"/convert", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, raw := range objects {
					var spoke LBRegistrar
					mustUnmarshal(b, raw, &spoke)
					var hub v1beta1.LBRegistrar
					ToHub(&spoke, &hub)
					mustMarshal(b, &hub)
				}
			}
		})
	}
}

func mustUnmarshal(b *testing.B, raw []byte, v any) {
	if err := json.Unmarshal(raw, v); err != nil {
		b.Fatal(err)
	}
}

func mustMarshal(b *testing.B, v any) {
	if _, err := json.Marshal(v); err != nil {
		b.Fatal(err)
	}
}
