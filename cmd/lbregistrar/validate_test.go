package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestValidateSamples(t *testing.T) {
	for _, path := range []string{
		filepath.Join(repo, "config", "samples"),
		filepath.Join(repo, "test", "testdata", "seed000-single-service.yaml"),
		testdata("list.yaml"),
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out, _, err := run(t, newValidateCommand(), "", "-f", path)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, " 0 invalid; 0 document(s) unreadable") {
				t.Errorf("output:\n%s", out)
			}
		})
	}
}

func TestValidateDeprecationWarnings(t *testing.T) {
	out, _, err := run(t, newValidateCommand(), "", "-f", filepath.Join(repo, "config", "samples", "v1alpha1_single_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"warning: spec.service is deprecated: use spec.services",
		"warning: spec.backendSetName is deprecated: use spec.services[].backendSetName",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A resource with seven distinct mistakes gives seven errors, each with its
// field and rule, in the JSON report.
func TestValidateEveryMistakeAsJSON(t *testing.T) {
	out, _, err := run(t, newValidateCommand(), "", "-f", testdata("many-mistakes.yaml"), "-o", "json")
	if !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v, want errInvalid", err)
	}
	var report validationReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if report.Invalid != 1 || len(report.Results) != 1 {
		t.Fatalf("report = %+v", report)
	}
	var got []string
	for _, p := range report.Results[0].Errors {
		got = append(got, p.Field+" "+p.Rule)
	}
	want := []string{
		"spec.loadBalancerId load-balancer-id",
		"spec.apiKey.region region",
		"spec.apiKey.fingerprint fingerprint",
		"spec.apiKey.privateKey.secretKeyRef.key secret-reference",
		"spec.services[0].backendSetName backend-set-name",
		"spec.services[1].nodePort port",
		"spec.services[1].weight weight",
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidateReportsUnreadableDocuments(t *testing.T) {
	out, _, err := run(t, newValidateCommand(), "", "-f", testdata("malformed.yaml"), "-f", testdata("mixed-v1alpha1.yaml"))
	if !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v, want errInvalid", err)
	}
	for _, want := range []string{
		testdata("malformed.yaml") + ":12: invalid YAML: did not find expected ',' or ']'",
		testdata("mixed-v1alpha1.yaml") + ":1: LBRegistrar mixed (nodes.peppy-ratio.dev/v1alpha1): 1 error(s)",
		"error: spec.service: Forbidden: ignored because spec.services is set",
		"1 LBRegistrar(s): 0 valid, 1 invalid; 1 document(s) unreadable; 1 other object(s) skipped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Unreadable documents are listed before the results, whatever order the
// files come in, so that a long report does not hide them.
func TestValidateListsUnreadableDocumentsFirst(t *testing.T) {
	out, _, err := run(t, newValidateCommand(), "", "-f", testdata("mixed-v1alpha1.yaml"), "-f", testdata("malformed.yaml"))
	if !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v, want errInvalid", err)
	}
	parse := strings.Index(out, testdata("malformed.yaml")+":12: invalid YAML")
	result := strings.Index(out, testdata("mixed-v1alpha1.yaml")+":1: LBRegistrar mixed")
	if parse < 0 || result < 0 || parse > result {
		t.Errorf("want the unreadable document before the results:\n%s", out)
	}
}

func TestValidateStdinAndFlags(t *testing.T) {
	out, _, err := run(t, newValidateCommand(), "apiVersion: v1\nkind: ConfigMap\n", "-f", "-")
	if err != nil || !strings.Contains(out, "0 LBRegistrar(s)") || !strings.Contains(out, "1 other object(s) skipped") {
		t.Errorf("err = %v, output:\n%s", err, out)
	}
	if _, _, err := run(t, newValidateCommand(), "", "-f", "-", "-o", "yaml"); err == nil {
		t.Error("-o yaml accepted")
	}
	if _, _, err := run(t, newValidateCommand(), ""); err == nil {
		t.Error("no -f accepted")
	}
}
