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
// controller's, the emulator's) spent, and how much of it inside one
// function.
type CPUWindow struct {
	buf    bytes.Buffer
	label  string
	inside string
}

// Sampled is the CPU seconds sampled in a window for one label value: in
// all, and inside the function the window was started with.
type Sampled struct{ All, Inside float64 }

// StartCPUWindow starts profiling; label is the profile label whose values
// Stop adds up, inside the function pprof names so (say
// "crypto/rsa.SignPKCS1v15"). It fails when a profile is already running
// (go test -cpuprofile).
func StartCPUWindow(label, inside string) (*CPUWindow, error) {
	w := &CPUWindow{label: label, inside: inside}
	if err := pprof.StartCPUProfile(&w.buf); err != nil {
		return nil, err
	}
	return w, nil
}

// Stop ends the profile and returns the CPU seconds sampled per value of
// the label; those of goroutines without it (the runtime's garbage
// collector, the test's own) under "". With save, it also writes the
// profile there, for go tool pprof.
func (w *CPUWindow) Stop(save string) (map[string]Sampled, error) {
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
	out := map[string]Sampled{}
	for _, s := range p.Sample {
		var value string
		if vs := s.Label[w.label]; len(vs) > 0 {
			value = vs[0]
		}
		seconds, sum := float64(s.Value[cpu])/1e9, out[value]
		sum.All += seconds
		if w.calls(s) {
			sum.Inside += seconds
		}
		out[value] = sum
	}
	return out, nil
}

// calls reports whether the function the window looks inside is on s's stack.
func (w *CPUWindow) calls(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && line.Function.Name == w.inside {
				return true
			}
		}
	}
	return false
}
