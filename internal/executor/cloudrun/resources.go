package cloudrun

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resources are what each task of the job is given: what the coordinator
// prices a segment's billed time with (vCPU-seconds, GiB-seconds and
// GPU-seconds).
type Resources struct {
	VCPU float64
	// MemoryMB is in mebibytes (Cloud Run's "Mi").
	MemoryMB int
	GPUs     int
}

// Cloud Run's defaults for a container that sets no limits.
const (
	defaultVCPU     = 1
	defaultMemoryMB = 512
)

// gpuLimit is the key of the GPU count in a container's limits.
const gpuLimit = "nvidia.com/gpu"

// jobResources reads a container's limits ("cpu": "2" or "2000m",
// "memory": "4Gi", "nvidia.com/gpu": "1"), with Cloud Run's defaults for
// those it does not set.
func jobResources(limits map[string]string) (Resources, error) {
	r := Resources{VCPU: defaultVCPU, MemoryMB: defaultMemoryMB}
	if s, ok := limits["cpu"]; ok {
		v, err := parseCPU(s)
		if err != nil {
			return r, err
		}
		r.VCPU = v
	}
	if s, ok := limits["memory"]; ok {
		v, err := parseMemoryMB(s)
		if err != nil {
			return r, err
		}
		r.MemoryMB = v
	}
	if s, ok := limits[gpuLimit]; ok {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return r, fmt.Errorf("GPU limit %q is not a count", s)
		}
		r.GPUs = v
	}
	return r, nil
}

// parseCPU reads a CPU quantity: "2", "0.5" or "500m".
func parseCPU(s string) (float64, error) {
	num, scale := s, 1.0
	if n, ok := strings.CutSuffix(s, "m"); ok {
		num, scale = n, 1e-3
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("CPU limit %q is not a quantity like \"2\" or \"500m\"", s)
	}
	return v * scale, nil
}

// memoryUnits are the suffixes of a memory quantity, longest first.
var memoryUnits = []struct {
	suffix string
	bytes  float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseMemoryMB reads a memory quantity ("512Mi", "4Gi", "2G", or bytes)
// in mebibytes, rounded to the nearest.
func parseMemoryMB(s string) (int, error) {
	num, unit := s, 1.0
	for _, u := range memoryUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.bytes
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("memory limit %q is not a quantity like \"512Mi\" or \"4Gi\"", s)
	}
	return int(math.Round(v * unit / (1 << 20))), nil
}
