package search

import (
	"math"
	"slices"
)

// Dense linear algebra for the gp and cmaes samplers. Matrices are
// row-major slices: element (i, j) of an n x n matrix a is a[i*n+j].

// cholesky overwrites the lower triangle of the symmetric positive-definite
// n x n matrix a with its Cholesky factor L (a = L Lᵀ) and zeroes the upper
// triangle. It reports false if a is not numerically positive definite.
func cholesky(a []float64, n int) bool {
	for j := range n {
		rj := a[j*n : j*n+j]
		d := a[j*n+j] - vecDot(rj, rj)
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			a[i*n+j] = (a[i*n+j] - vecDot(a[i*n:i*n+j], rj)) / d
		}
		for k := j + 1; k < n; k++ {
			a[j*n+k] = 0
		}
	}
	return true
}

// solveLower overwrites b with L⁻¹b for the lower-triangular n x n l.
func solveLower(l []float64, n int, b []float64) {
	for i := range n {
		b[i] = (b[i] - vecDot(l[i*n:i*n+i], b[:i])) / l[i*n+i]
	}
}

// solveUpperT overwrites b with L⁻ᵀb for the lower-triangular n x n l.
func solveUpperT(l []float64, n int, b []float64) {
	for i := n - 1; i >= 0; i-- {
		b[i] /= l[i*n+i]
		bi := b[i]
		for k := range i {
			b[k] -= l[i*n+k] * bi
		}
	}
}

// cholInverse returns (L Lᵀ)⁻¹ for the lower-triangular n x n l, full.
func cholInverse(l []float64, n int) []float64 {
	// Row j of u is column j of L⁻¹, by forward substitution, so that
	// u = L⁻ᵀ is upper triangular and every inner loop runs along rows.
	u := make([]float64, n*n)
	for j := range n {
		x := u[j*n : j*n+n]
		x[j] = 1 / l[j*n+j]
		for k := j + 1; k < n; k++ {
			x[k] = -vecDot(l[k*n+j:k*n+k], x[j:k]) / l[k*n+k]
		}
	}
	// (L Lᵀ)⁻¹ = L⁻ᵀ L⁻¹ = u uᵀ.
	out := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			s := vecDot(u[i*n+i:i*n+n], u[j*n+i:j*n+n])
			out[i*n+j], out[j*n+i] = s, s
		}
	}
	return out
}

// jacobiEigen returns the eigenvalues and eigenvectors of the symmetric
// n x n matrix a by cyclic Jacobi rotations (Golub and Van Loan, "Matrix
// Computations", §8.5): column j of vecs is the eigenvector of vals[j]. a
// is not modified.
func jacobiEigen(a []float64, n int) (vals, vecs []float64) {
	m := slices.Clone(a)
	vecs = make([]float64, n*n)
	for i := range n {
		vecs[i*n+i] = 1
	}
	for range 100 {
		var off, diag float64
		for i := range n {
			diag += m[i*n+i] * m[i*n+i]
			for j := i + 1; j < n; j++ {
				off += m[i*n+j] * m[i*n+j]
			}
		}
		if off <= 1e-30*diag || off == 0 {
			break
		}
		for p := range n {
			for q := p + 1; q < n; q++ {
				apq := m[p*n+q]
				if apq == 0 {
					continue
				}
				theta := (m[q*n+q] - m[p*n+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range n {
					mkp, mkq := m[k*n+p], m[k*n+q]
					m[k*n+p], m[k*n+q] = c*mkp-s*mkq, s*mkp+c*mkq
				}
				for k := range n {
					mpk, mqk := m[p*n+k], m[q*n+k]
					m[p*n+k], m[q*n+k] = c*mpk-s*mqk, s*mpk+c*mqk
				}
				for k := range n {
					vkp, vkq := vecs[k*n+p], vecs[k*n+q]
					vecs[k*n+p], vecs[k*n+q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	vals = make([]float64, n)
	for i := range n {
		vals[i] = m[i*n+i]
	}
	return vals, vecs
}

// vecDot is the dot product of a and b[:len(a)], with four accumulators
// for instruction-level parallelism.
func vecDot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
