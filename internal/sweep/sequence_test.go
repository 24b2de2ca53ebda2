package sweep

import (
	"slices"
	"testing"
)

func TestAdaptivePathIsTheLongestTheSweepCanRun(t *testing.T) {
	for _, c := range []struct {
		ladder     []int
		resolution int
		want       []int
		capacity   int
	}{
		// doubling to 16, then bisecting 8-16 down to one session
		{[]int{2, 16}, 1, []int{2, 4, 8, 16, 12, 10, 9}, 8},
		// the default's ladder: 12 is never run on the climb (4, 8, 16, 20)
		{[]int{4, 8, 12, 16, 20}, 1, []int{4, 8, 16, 12, 10, 9}, 8},
		// recommend's: bisection stops 4 sessions apart
		{[]int{4, 8, 12, 16, 20}, 4, []int{4, 8, 16, 12}, 8},
		{[]int{8}, 1, []int{8}, 0},
		{nil, 1, nil, 0},
	} {
		got, capacity := AdaptivePath(c.ladder, c.resolution)
		if !slices.Equal(got, c.want) || capacity != c.capacity {
			t.Errorf("AdaptivePath(%v, %d) = %v for a capacity of %d, want %v for %d", c.ladder, c.resolution, got, capacity, c.want, c.capacity)
		}
	}
}
