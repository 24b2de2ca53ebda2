package load

import (
	"syscall"
	"testing"
	"unsafe"
)

// cmsgStamp finds the receive time among the control messages and gives
// up on ones that are cut short.
func TestCmsgStamp(t *testing.T) {
	msg := func(level, typ int32, data []byte) []byte {
		b := make([]byte, syscall.CmsgSpace(len(data)))
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = level, typ
		h.SetLen(syscall.CmsgLen(len(data)))
		copy(b[syscall.CmsgLen(0):], data)
		return b
	}
	ts := syscall.NsecToTimespec(1_700_000_000_000_000_123)
	stamp := unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
	for _, tc := range []struct {
		name string
		oob  []byte
		want int64
		ok   bool
	}{
		{"none", nil, 0, false},
		{"the stamp alone", msg(syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, stamp), 1_700_000_000_000_000_123, true},
		{"after another message", append(msg(syscall.SOL_SOCKET, syscall.SCM_RIGHTS, []byte{1, 2, 3, 4}), msg(syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, stamp)...), 1_700_000_000_000_000_123, true},
		{"another level", msg(syscall.IPPROTO_TCP, syscall.SO_TIMESTAMPNS, stamp), 0, false},
		{"cut short", msg(syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, stamp)[:syscall.CmsgLen(0)+4], 0, false},
	} {
		got, ok := cmsgStamp(tc.oob)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
