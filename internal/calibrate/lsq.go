package calibrate

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
)

// lsq is a non-negative least-squares fit with the standard error of each
// coefficient (0 for one held at zero).
type lsq struct {
	coef, se []float64
	rms      float64 // root mean square residual
}

// fitNonNegative minimises |X b - y| over b >= 0 for a few columns by
// trying every subset of free columns (the others held at zero) and
// keeping the best solution whose coefficients are all non-negative.
// Columns are scaled to unit norm first, so the solve is well conditioned.
func fitNonNegative(x [][]float64, y []float64) (lsq, error) {
	n := len(y)
	if n == 0 {
		return lsq{}, errors.New("no equations")
	}
	p := len(x[0])
	scale := make([]float64, p)
	for _, row := range x {
		for j, v := range row {
			scale[j] += v * v
		}
	}
	for j := range scale {
		scale[j] = math.Sqrt(scale[j])
	}
	best := lsq{rms: math.Inf(1)}
	bestRSS := math.Inf(1)
	for mask := 1; mask < 1<<p; mask++ {
		var cols []int
		for j := range p {
			if mask&(1<<j) != 0 && scale[j] > 0 {
				cols = append(cols, j)
			}
		}
		if len(cols) == 0 || len(cols) > n {
			continue
		}
		a := mat.NewDense(n, len(cols), nil)
		for i, row := range x {
			for c, j := range cols {
				a.Set(i, c, row[j]/scale[j])
			}
		}
		var b mat.VecDense
		if err := b.SolveVec(a, mat.NewVecDense(n, append([]float64(nil), y...))); err != nil {
			continue
		}
		ok := true
		for c := range cols {
			if b.AtVec(c) < 0 {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var res mat.VecDense
		res.MulVec(a, &b)
		rss := 0.0
		for i := range n {
			d := res.AtVec(i) - y[i]
			rss += d * d
		}
		if rss >= bestRSS {
			continue
		}
		bestRSS = rss
		fit := lsq{coef: make([]float64, p), se: make([]float64, p), rms: math.Sqrt(rss / float64(n))}
		for c, j := range cols {
			fit.coef[j] = b.AtVec(c) / scale[j]
		}
		// standard errors from sigma^2 (A'A)^-1
		if dof := n - len(cols); dof > 0 {
			var ata, inv mat.Dense
			ata.Mul(a.T(), a)
			if inv.Inverse(&ata) == nil {
				s2 := rss / float64(dof)
				for c, j := range cols {
					fit.se[j] = math.Sqrt(math.Max(0, s2*inv.At(c, c))) / scale[j]
				}
			}
		}
		best = fit
	}
	if best.coef == nil {
		return best, errors.New("no non-negative solution")
	}
	return best, nil
}
