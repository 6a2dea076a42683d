package validation

import (
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Hand-written matchers for the identifiers this package checks on every
// admission request: regular expressions made up most of the webhook's cost.

// isOCID reports whether s is ocid1.<type>.<realm>.[region][.future use].<unique id>
// with one of the given resource types.
func isOCID(s string, types ...string) bool {
	rest, ok := strings.CutPrefix(s, "ocid1.")
	if !ok {
		return false
	}
	typ, rest, _ := strings.Cut(rest, ".")
	realm, rest, _ := strings.Cut(rest, ".")
	region, rest, ok := strings.Cut(rest, ".")
	if !ok || !isLowerAlnum(realm, false) || !isLowerAlnum(region, true) {
		return false
	}
	if future, unique, ok := strings.Cut(rest, "."); ok {
		if future == "" || !isLowerAlnum(future, true) {
			return false
		}
		rest = unique
	}
	return isLowerAlnum(rest, false) && contains(types, typ)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// isLowerAlnum reports whether s is a non-empty run of [a-z0-9], or of
// [a-z0-9-] (possibly empty) when dash is set.
func isLowerAlnum(s string, dash bool) bool {
	if s == "" {
		return dash
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && (!dash || c != '-') {
			return false
		}
	}
	return true
}

// isRegion reports whether s is a region identifier (ap-tokyo-1,
// us-gov-ashburn-1: two or more lowercase words and a number) or a region key
// (three lowercase letters), the two forms the OCI SDK resolves.
func isRegion(s string) bool {
	if len(s) == 3 {
		return isLetters(s)
	}
	parts := 0
	for rest := s; ; parts++ {
		word, tail, more := strings.Cut(rest, "-")
		if !more {
			return parts >= 2 && word != "" && isDigits(word)
		}
		if !isLetters(word) {
			return false
		}
		rest = tail
	}
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return s != ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isFingerprint reports whether s is 16 colon-separated hex pairs.
func isFingerprint(s string) bool {
	if len(s) != 16*3-1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i%3 == 2 {
			if s[i] != ':' {
				return false
			}
		} else if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isBackendSetName reports whether s has only letters, digits, '-' and '_'.
func isBackendSetName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return s != ""
}

// nameCheck is one of apimachinery's name checks with a fast path that
// accepts the common valid names without a regular expression; apimachinery
// still decides, and words the message, for anything else.
type nameCheck struct {
	fast func(string) bool
	full func(string) []string
}

func (c nameCheck) errors(s string) []string {
	if c.fast(s) {
		return nil
	}
	return c.full(s)
}

var (
	dns1123Label     = nameCheck{fast: func(s string) bool { return isLabel(s, false) }, full: utilvalidation.IsDNS1123Label}
	dns1035Label     = nameCheck{fast: func(s string) bool { return isLabel(s, true) }, full: utilvalidation.IsDNS1035Label}
	dns1123Subdomain = nameCheck{fast: isSubdomain, full: utilvalidation.IsDNS1123Subdomain}
	configMapKey     = nameCheck{fast: isPlainKey, full: utilvalidation.IsConfigMapKey}
)

// isLabel: 1-63 of [a-z0-9-], alphanumeric at both ends (a letter first when
// letterFirst is set).
func isLabel(s string, letterFirst bool) bool {
	if len(s) == 0 || len(s) > 63 || !isLowerAlnum(s, true) || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	return !letterFirst || 'a' <= s[0] && s[0] <= 'z'
}

func isSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for rest := s; ; {
		label, tail, more := strings.Cut(rest, ".")
		if !isLabel(label, false) {
			return false
		}
		if !more {
			return true
		}
		rest = tail
	}
}

// isPlainKey accepts keys of letters, digits, '-' and '_' only, which are
// always valid Secret keys.
func isPlainKey(s string) bool {
	return len(s) <= 253 && isBackendSetName(s)
}
