package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFit(t *testing.T) {
	long := strings.Repeat("node node-0: GetInstance: 404 NotAuthorizedOrNotFound; ", 20)
	for _, tc := range []struct {
		note string
		want string
	}{
		{"short", "short"},
		{strings.Repeat("a", Limit), strings.Repeat("a", Limit)},
		{strings.Repeat("a", Limit-3) + "üü", strings.Repeat("a", Limit-3) + "…"},
		{strings.Repeat("a", Limit-4) + "üüü", strings.Repeat("a", Limit-4) + "…"},
		{long, long[:Limit-len("…")] + "…"},
	} {
		got := Fit(tc.note)
		if got != tc.want || len(got) > Limit || !utf8.ValidString(got) {
			t.Errorf("Fit(%d bytes) = %q (%d bytes), want %q", len(tc.note), got, len(got), tc.want)
		}
	}
}
