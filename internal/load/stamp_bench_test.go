package load

import (
	"fmt"
	"testing"
)

// BenchmarkStampAB runs BenchmarkStreamSteady's 1,000 steady streams with
// tokens stamped at the kernel's receive time (the client as it is), at
// the return of the connection's read, and at their parse (as it was), in
// alternating rounds in one process, so all three see the same load.
func BenchmarkStampAB(b *testing.B) {
	base := startBenchServer(b) + "/paced"
	for round := 1; round <= 3; round++ {
		for _, stamp := range []string{stampParse, stampRead, stampKernel} {
			b.Run(fmt.Sprintf("round=%d/stamp=%s", round, stamp), func(b *testing.B) {
				benchStreamsStamped(b, base, 1000, pacedInterval*benchTokens, stamp)
			})
		}
	}
}
