package load

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// kernelStamps reads a TCP connection with recvmsg and the kernel's
// receive time of the last segment each read took (SO_TIMESTAMPNS, on the
// wall clock), so a stamp does not wait for the reading goroutine to be
// scheduled. It is not safe for concurrent reads (a connection is read by
// one goroutine at a time).
type kernelStamps struct {
	rc   syscall.RawConn
	f    func(fd uintptr) bool // reads p into n, err, oobn; made once, so a read allocates nothing
	p    []byte
	oobb [64]byte
	n    int
	oobn int
	err  error
}

// newKernelStamps is nil unless conn is a TCP connection whose kernel
// agrees to stamp what it receives.
func newKernelStamps(conn net.Conn) *kernelStamps {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return nil
	}
	k := &kernelStamps{rc: rc}
	k.f = func(fd uintptr) bool {
		for {
			k.n, k.oobn, _, _, k.err = syscall.Recvmsg(int(fd), k.p, k.oobb[:], 0)
			if k.err != syscall.EINTR {
				return k.err != syscall.EAGAIN
			}
		}
	}
	return k
}

// read reads into p as net.Conn's Read does and says when the last of the
// bytes arrived: the kernel's stamp, moved onto the monotonic clock, or the
// read's return when the kernel sent none.
func (k *kernelStamps) read(p []byte) (n int, arrived time.Time, err error) {
	if len(p) == 0 {
		return 0, time.Now(), nil
	}
	k.p = p
	rerr := k.rc.Read(k.f)
	k.p = nil
	now := time.Now()
	if rerr != nil {
		return 0, now, rerr
	}
	if k.err != nil {
		return 0, now, &net.OpError{Op: "read", Net: "tcp", Err: k.err}
	}
	if k.n == 0 {
		return 0, now, io.EOF
	}
	if wall, ok := cmsgStamp(k.oobb[:k.oobn]); ok {
		// a stamp in the future or over a minute old is a clock step, not
		// a delay: the read's return is nearer the truth then
		if d := now.UnixNano() - wall; d >= 0 && d < int64(time.Minute) {
			return k.n, now.Add(-time.Duration(d)), nil
		}
	}
	return k.n, now, nil
}

// cmsgStamp finds the SCM_TIMESTAMPNS message in oob (Unix ns).
func cmsgStamp(oob []byte) (int64, bool) {
	hdr := syscall.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0, false
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SO_TIMESTAMPNS && l-hdr >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			return ts.Nano(), true
		}
		next := syscall.CmsgSpace(l - hdr)
		if next > len(oob) {
			return 0, false
		}
		oob = oob[next:]
	}
	return 0, false
}
