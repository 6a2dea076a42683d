package ociemu

// TB is what StartSeeded needs of a test: a *testing.T or *testing.B.
// An interface, so that the commands serving the emulator do not link the
// testing package.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// StartSeeded starts an emulator with opts, with the load balancers of
// the seed file at path, and closes it when the test ends. It fails the
// test if either cannot be done.
func StartSeeded(t TB, path string, opts Options) *Emulator {
	t.Helper()
	emu, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	seed, err := LoadSeedFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.SeedState(seed); err != nil {
		t.Fatal(err)
	}
	return emu
}
