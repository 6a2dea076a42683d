package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// --addresses-file is replaced whole: a reader polling it while serve writes
// finds it missing or complete, never in part, and no temporary file is left.
func TestAddressesFileIsWrittenWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "addresses.json")
	want := listenerAddresses{Webhook: "127.0.0.1:40001", Health: "127.0.0.1:40002", Metrics: "127.0.0.1:40003"}
	written := make(chan error, 1)
	go func() {
		for range 200 {
			if err := writeAddresses(path, want); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	for reading := true; reading; {
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
			reading = false
		default:
		}
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		var got listenerAddresses
		if err == nil {
			err = json.Unmarshal(data, &got)
		}
		if err != nil || got != want {
			t.Fatalf("read %q (%v), want %+v", data, err, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "addresses.json" {
		t.Errorf("%s contains %v, want addresses.json alone", dir, entries)
	}
}
