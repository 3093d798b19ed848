package search

import (
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/spec"
)

func TestSobolUnscrambled(t *testing.T) {
	// The first points of dimensions 1 to 4, as in Joe and Kuo's tables.
	want := [][]float64{
		{0, 0, 0, 0},
		{0.5, 0.5, 0.5, 0.5},
		{0.75, 0.25, 0.25, 0.25},
		{0.25, 0.75, 0.75, 0.75},
		{0.375, 0.375, 0.625, 0.875},
		{0.875, 0.875, 0.125, 0.375},
		{0.625, 0.125, 0.875, 0.625},
		{0.125, 0.625, 0.375, 0.125},
	}
	for n, point := range want {
		for d, x := range point {
			if got := float64(sobolInt(uint32(n), d)) * 0x1p-32; got != x {
				t.Errorf("point %d, dimension %d: %v, want %v", n, d+1, got, x)
			}
		}
	}

	// Point 2^31 + 12345 in all 64 dimensions, as 32-bit integers, from
	// scipy.stats.qmc.Sobol(d=64, scramble=False, bits=32): it involves
	// every direction number of the table.
	far := []uint32{
		2752774147, 2238272853, 1645001659, 4141547569, 1937141223, 3480841581, 1621408785, 1458714307,
		3246064307, 1452380627, 1299451447, 3496554719, 2711945645, 1777074401, 82100999, 726381875,
		1657502017, 3923725707, 4258238693, 2297167877, 2550464515, 3223257099, 437891075, 1388974095,
		1256946439, 2749790977, 3316242185, 739709187, 2053549051, 1638569695, 1556555831, 3281757661,
		1823236049, 1301972831, 498555065, 2450437655, 2250968595, 2471815143, 1647255287, 2647898923,
		2677556307, 2750985723, 3779720961, 404700343, 175629443, 3362202735, 1896829779, 2470669463,
		2932134693, 4251844153, 864841951, 1963028757, 2768533365, 3980919479, 1068971829, 265363179,
		3277476003, 3824694093, 1952720615, 4114959093, 4145090921, 2008115897, 1560737741, 1439752459,
	}
	if len(far) != len(directions) {
		t.Fatalf("%d dimensions, want %d", len(directions), len(far))
	}
	for d, x := range far {
		if got := sobolInt(1<<31+12345, d); got != x {
			t.Errorf("point 2^31+12345, dimension %d: %d, want %d", d+1, got, x)
		}
	}
}

func TestSobolScrambledNet(t *testing.T) {
	const m = 8 // 2^m points
	for _, seed := range []uint64{0, 1, 42} {
		point := sobolPoint(seed)
		coords := make([][]float64, len(directions))
		for d := range coords {
			coords[d] = make([]float64, 1<<m)
			for n := range coords[d] {
				u, err := point(n, d)
				if err != nil {
					t.Fatal(err)
				}
				if u < 0 || u >= 1 {
					t.Fatalf("seed %d, point %d, dimension %d: %v, want a value in [0, 1)", seed, n, d+1, u)
				}
				coords[d][n] = u
			}
		}
		// Every dimension is a (0, m, 1)-net: one point in each of 2^m
		// equal intervals.
		for d, us := range coords {
			seen := make([]bool, 1<<m)
			for n, u := range us {
				bin := int(u * (1 << m))
				if seen[bin] {
					t.Errorf("seed %d, dimension %d: point %d is the second in interval %d of %d", seed, d+1, n, bin, 1<<m)
				}
				seen[bin] = true
			}
		}
		// Dimensions 1 and 2 are a (0, m, 2)-net: one point in each
		// elementary interval of area 2^-m, of every shape 2^-a x 2^-(m-a).
		for a := 0; a <= m; a++ {
			seen := make(map[[2]int]bool)
			for n := range 1 << m {
				cell := [2]int{int(coords[0][n] * float64(int(1)<<a)), int(coords[1][n] * float64(int(1)<<(m-a)))}
				if seen[cell] {
					t.Errorf("seed %d: point %d is the second in cell %v of shape 2^-%d x 2^-%d", seed, n, cell, a, m-a)
				}
				seen[cell] = true
			}
		}
	}
}

func TestSobolScrambling(t *testing.T) {
	first := func(seed uint64) []float64 {
		point := sobolPoint(seed)
		us := make([]float64, len(directions))
		for d := range us {
			u, err := point(0, d)
			if err != nil {
				t.Fatal(err)
			}
			if u == 0 {
				t.Errorf("seed %d: point 0 is 0 in dimension %d: not scrambled", seed, d+1)
			}
			us[d] = u
		}
		return us
	}
	a, b := first(1), first(2)
	for d := range a {
		if a[d] == b[d] {
			t.Errorf("dimension %d: point 0 is %v with seeds 1 and 2", d+1, a[d])
		}
	}
}

func TestSobolSequenceEnd(t *testing.T) {
	s := newSampler(t, spec.Sobol, 0, floats(2))
	if _, err := s.Sample(t.Context(), 1<<32-1, nil); err != nil {
		t.Errorf("Sample(2^32-1): %v", err)
	}
	_, err := s.Sample(t.Context(), 1<<32, nil)
	if err == nil || !strings.Contains(err.Error(), "past the sequence's 2^32 points") {
		t.Errorf("Sample(2^32): err = %v, want past the end", err)
	}
}
