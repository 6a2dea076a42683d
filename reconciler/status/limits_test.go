package status

import (
	"testing"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

func TestNearLimit(t *testing.T) {
	tests := []struct {
		n, limit int
		want     string
	}{
		{0, 512, ""},
		{460, 512, ""},
		{461, 512, `backend set "s" has 461 of the 512 backends OCI lets it have`},
		{512, 512, `backend set "s" has 512 of the 512 backends OCI lets it have`},
		{600, 512, `backend set "s" is wanted to have 600 backends; OCI lets it have 512`},
		{2, 2, ""},
		{3, 2, `backend set "s" is wanted to have 3 backends; OCI lets it have 2`},
	}
	for _, tc := range tests {
		got := ""
		if is := NearLimit("s", tc.n, tc.limit); is != nil {
			got = is.Message
			if is.Reason != v1beta1.ReasonBackendLimit {
				t.Errorf("reason %q", is.Reason)
			}
		}
		if got != tc.want {
			t.Errorf("NearLimit(%d, %d) = %q, want %q", tc.n, tc.limit, got, tc.want)
		}
	}
}
