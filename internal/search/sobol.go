package search

import "fmt"

// The Sobol sampler maps point n of a scrambled Sobol sequence to trial n,
// one dimension per non-constant parameter in declaration order.
//
// The sequence is Sobol's, with the direction numbers of S. Joe and F. Y.
// Kuo, "Constructing Sobol sequences with better two-dimensional
// projections", SIAM J. Sci. Comput. 30 (2008) 2635-2654 (the file
// new-joe-kuo-6.21201), generated in Gray-code order like Joe and Kuo's own
// generator: point n is the XOR of the direction numbers selected by the bits
// of n^(n>>1), so every prefix of 2^m points is the same set as in natural
// order, a (t, m, s)-net.
//
// The scrambling is Owen's nested uniform scrambling in base 2 (A. B. Owen,
// "Randomly permuted (t,m,s)-nets and (t,s)-sequences", 1995), exact to the
// 32 bits of the direction numbers: bit k of a coordinate is flipped or not
// according to a hash of the seed, the dimension and the coordinate's k
// leading bits, so points that share a prefix share its scrambling. The bits
// past the 32nd, where the unscrambled sequence has only zeros, become
// independent uniform bits (hashed from the whole 32-bit prefix), so a
// coordinate is uniform on [0, 1) with 53 bits of precision. Scrambling keeps
// the net property: the first 2^m points still put exactly one point in each
// of the 2^m equal intervals of every dimension.

// sobolBits is the precision of the direction numbers: the sequence has
// 2^32 points.
const sobolBits = 32

// joeKuo holds dimensions 2 to 64 of new-joe-kuo-6.21201 (dimension 1 is
// van der Corput's sequence and needs none): a is the inner coefficients of
// the primitive polynomial of degree s = len(m), m the initial direction
// integers m_1 .. m_s.
var joeKuo = [...]struct {
	a uint32
	m []uint32
}{
	{0, []uint32{1}},
	{1, []uint32{1, 3}},
	{1, []uint32{1, 3, 1}},
	{2, []uint32{1, 1, 1}},
	{1, []uint32{1, 1, 3, 3}},
	{4, []uint32{1, 3, 5, 13}},
	{2, []uint32{1, 1, 5, 5, 17}},
	{4, []uint32{1, 1, 5, 5, 5}},
	{7, []uint32{1, 1, 7, 11, 19}},
	{11, []uint32{1, 1, 5, 1, 1}},
	{13, []uint32{1, 1, 1, 3, 11}},
	{14, []uint32{1, 3, 5, 5, 31}},
	{1, []uint32{1, 3, 3, 9, 7, 49}},
	{13, []uint32{1, 1, 1, 15, 21, 21}},
	{16, []uint32{1, 3, 1, 13, 27, 49}},
	{19, []uint32{1, 1, 1, 15, 7, 5}},
	{22, []uint32{1, 3, 1, 15, 13, 25}},
	{25, []uint32{1, 1, 5, 5, 19, 61}},
	{1, []uint32{1, 3, 7, 11, 23, 15, 103}},
	{4, []uint32{1, 3, 7, 13, 13, 15, 69}},
	{7, []uint32{1, 1, 3, 13, 7, 35, 63}},
	{8, []uint32{1, 3, 5, 9, 1, 25, 53}},
	{14, []uint32{1, 3, 1, 13, 9, 35, 107}},
	{19, []uint32{1, 3, 1, 5, 27, 61, 31}},
	{21, []uint32{1, 1, 5, 11, 19, 41, 61}},
	{28, []uint32{1, 3, 5, 3, 3, 13, 69}},
	{31, []uint32{1, 1, 7, 13, 1, 19, 1}},
	{32, []uint32{1, 3, 7, 5, 13, 19, 59}},
	{37, []uint32{1, 1, 3, 9, 25, 29, 41}},
	{41, []uint32{1, 3, 5, 13, 23, 1, 55}},
	{42, []uint32{1, 3, 7, 3, 13, 59, 17}},
	{50, []uint32{1, 3, 1, 3, 5, 53, 69}},
	{55, []uint32{1, 1, 5, 5, 23, 33, 13}},
	{56, []uint32{1, 1, 7, 7, 1, 61, 123}},
	{59, []uint32{1, 1, 7, 9, 13, 61, 49}},
	{62, []uint32{1, 3, 3, 5, 3, 55, 33}},
	{14, []uint32{1, 3, 1, 15, 31, 13, 49, 245}},
	{21, []uint32{1, 3, 5, 15, 31, 59, 63, 97}},
	{22, []uint32{1, 3, 1, 11, 11, 11, 77, 249}},
	{38, []uint32{1, 3, 1, 11, 27, 43, 71, 9}},
	{47, []uint32{1, 1, 7, 15, 21, 11, 81, 45}},
	{49, []uint32{1, 3, 7, 3, 25, 31, 65, 79}},
	{50, []uint32{1, 3, 1, 1, 19, 11, 3, 205}},
	{52, []uint32{1, 1, 5, 9, 19, 21, 29, 157}},
	{56, []uint32{1, 3, 7, 11, 1, 33, 89, 185}},
	{67, []uint32{1, 3, 3, 3, 15, 9, 79, 71}},
	{70, []uint32{1, 3, 7, 11, 15, 39, 119, 27}},
	{84, []uint32{1, 1, 3, 1, 11, 31, 97, 225}},
	{97, []uint32{1, 1, 1, 3, 23, 43, 57, 177}},
	{103, []uint32{1, 3, 7, 7, 17, 17, 37, 71}},
	{115, []uint32{1, 3, 1, 5, 27, 63, 123, 213}},
	{122, []uint32{1, 1, 3, 5, 11, 43, 53, 133}},
	{8, []uint32{1, 3, 5, 5, 29, 17, 47, 173, 479}},
	{13, []uint32{1, 3, 3, 11, 3, 1, 109, 9, 69}},
	{16, []uint32{1, 1, 1, 5, 17, 39, 23, 5, 343}},
	{22, []uint32{1, 3, 1, 5, 25, 15, 31, 103, 499}},
	{25, []uint32{1, 1, 1, 11, 11, 17, 63, 105, 183}},
	{44, []uint32{1, 1, 5, 11, 9, 29, 97, 231, 363}},
	{47, []uint32{1, 1, 5, 15, 19, 45, 41, 7, 383}},
	{52, []uint32{1, 3, 7, 7, 31, 19, 83, 137, 221}},
	{55, []uint32{1, 1, 1, 3, 23, 15, 111, 223, 83}},
	{59, []uint32{1, 1, 5, 13, 31, 15, 55, 25, 161}},
	{62, []uint32{1, 1, 3, 13, 25, 47, 39, 87, 257}},
}

// directions[d][k] is direction number k+1 of dimension d+1, a binary
// fraction with 32 bits.
var directions = makeDirections()

func makeDirections() [][sobolBits]uint32 {
	dirs := make([][sobolBits]uint32, 1+len(joeKuo))
	for k := range sobolBits {
		dirs[0][k] = 1 << (sobolBits - 1 - k)
	}
	for i, row := range joeKuo {
		v := &dirs[i+1]
		s := len(row.m)
		for k := range sobolBits {
			if k < s {
				v[k] = row.m[k] << (sobolBits - 1 - k)
				continue
			}
			// Bratley and Fox's recurrence, in Joe and Kuo's notation:
			// v_k = a_1 v_{k-1} ^ ... ^ a_{s-1} v_{k-s+1} ^ v_{k-s} ^ v_{k-s}/2^s.
			x := v[k-s] ^ v[k-s]>>s
			for j := 1; j < s; j++ {
				if row.a>>(s-1-j)&1 == 1 {
					x ^= v[k-j]
				}
			}
			v[k] = x
		}
	}
	return dirs
}

// sobolInt returns coordinate dim of point n of the unscrambled sequence in
// Gray-code order, as a binary fraction with 32 bits.
func sobolInt(n uint32, dim int) uint32 {
	v := &directions[dim]
	var x uint32
	for g, k := n^n>>1, 0; g != 0; g, k = g>>1, k+1 {
		if g&1 != 0 {
			x ^= v[k]
		}
	}
	return x
}

// owen scrambles x, the 32 leading bits of a coordinate whose further bits
// are zero, with nested uniform scrambling keyed by seed, and returns the
// scrambled coordinate as 53 bits.
func owen(x uint32, seed uint64) uint64 {
	var flips uint32
	for k := range sobolBits {
		// The node of the scrambling tree at depth k under the prefix of
		// k leading bits, numbered as in a binary heap.
		node := uint64(1)<<k | uint64(x)>>(sobolBits-k)
		flips |= uint32(mix(seed^node)>>63) << (sobolBits - 1 - k)
	}
	tail := mix(seed^(uint64(1)<<sobolBits|uint64(x))) >> (64 - (53 - sobolBits))
	return uint64(x^flips)<<(53-sobolBits) | tail
}

// sobolPoint returns the coordinates of the Sobol sequence scrambled with
// seed.
func sobolPoint(seed uint64) func(n, dim int) (float64, error) {
	base := mix(seed ^ 0x736f626f6c) // "sobol"
	return func(n, dim int) (float64, error) {
		if uint64(n) >= 1<<sobolBits {
			return 0, fmt.Errorf("sobol sampler: trial %d is past the sequence's 2^%d points", n, sobolBits)
		}
		return float64(owen(sobolInt(uint32(n), dim), mix(base+uint64(dim)))) * 0x1p-53, nil
	}
}
