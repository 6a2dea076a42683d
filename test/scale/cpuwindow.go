package scale

import (
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/google/pprof/profile"
)

// CPUWindow profiles this process's CPU from StartCPUWindow to Stop, to
// tell apart what the goroutines of each profile label value (the
// controller's, the emulator's) spent.
type CPUWindow struct {
	buf   bytes.Buffer
	label string
}

// StartCPUWindow starts profiling; label is the profile label whose values
// Stop adds up. It fails when a profile is already running (go test
// -cpuprofile).
func StartCPUWindow(label string) (*CPUWindow, error) {
	w := &CPUWindow{label: label}
	if err := pprof.StartCPUProfile(&w.buf); err != nil {
		return nil, err
	}
	return w, nil
}

// Stop ends the profile and returns the CPU seconds sampled per value of
// the label; those of goroutines without it (the runtime's garbage
// collector, the test's own) under "". With save, it also writes the
// profile there, for go tool pprof.
func (w *CPUWindow) Stop(save string) (map[string]float64, error) {
	pprof.StopCPUProfile()
	if save != "" {
		if err := os.WriteFile(save, w.buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	p, err := profile.Parse(&w.buf)
	if err != nil {
		return nil, err
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, fmt.Errorf("the profile has no CPU time among its sample types %v", p.SampleType)
	}
	out := map[string]float64{}
	for _, s := range p.Sample {
		var value string
		if vs := s.Label[w.label]; len(vs) > 0 {
			value = vs[0]
		}
		out[value] += float64(s.Value[cpu]) / 1e9
	}
	return out, nil
}
