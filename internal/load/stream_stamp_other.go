//go:build !linux

package load

import (
	"net"
	"time"
)

// kernelStamps is the kernel's receive times, which only Linux gives here:
// elsewhere a read is stamped when it returns.
type kernelStamps struct{}

func newKernelStamps(net.Conn) *kernelStamps { return nil }

func (*kernelStamps) read([]byte) (int, time.Time, error) { panic("no kernel stamps off Linux") }
