package ociemu

import "testing"

// The overall rule of BackendSetHealth.Status, at its boundaries.
func TestOverallHealth(t *testing.T) {
	tests := []struct {
		ok, unknown, total int
		want               string
	}{
		{0, 0, 0, healthUnknown},
		{3, 0, 3, healthOK},
		{1, 2, 3, healthUnknown},  // more than half UNKNOWN
		{2, 2, 4, healthWarning},  // half UNKNOWN is not more than half
		{2, 0, 4, healthWarning},  // half OK
		{1, 0, 3, healthCritical}, // fewer than half OK
		{0, 1, 2, healthCritical},
	}
	for _, tc := range tests {
		if got := overallHealth(tc.ok, tc.unknown, tc.total); got != tc.want {
			t.Errorf("overallHealth(ok %d, unknown %d, total %d) = %s, want %s", tc.ok, tc.unknown, tc.total, got, tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for ip, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.99": false, "192.168.9.9": false, "fd00::1": false, "localhost": false, "": false, "0.0.0.0": false,
	} {
		if got := isLoopback(ip); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", ip, got, want)
		}
	}
}
