package ioengine

import (
	"testing"
	"unsafe"
)

// TestABI checks the Go mirrors of the io_uring structures against the
// sizes and offsets of include/uapi/linux/io_uring.h.
func TestABI(t *testing.T) {
	var s sqe
	var c cqe
	var p params
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(io_uring_sqe)", unsafe.Sizeof(s), 64},
		{"sqe.fd", unsafe.Offsetof(s.fd), 4},
		{"sqe.off", unsafe.Offsetof(s.off), 8},
		{"sqe.addr", unsafe.Offsetof(s.addr), 16},
		{"sqe.len", unsafe.Offsetof(s.len), 24},
		{"sqe.rw_flags", unsafe.Offsetof(s.rwFlags), 28},
		{"sqe.user_data", unsafe.Offsetof(s.userData), 32},
		{"sqe.buf_index", unsafe.Offsetof(s.bufIndex), 40},
		{"sqe.addr3", unsafe.Offsetof(s.addr3), 48},
		{"sizeof(io_uring_cqe)", unsafe.Sizeof(c), 16},
		{"cqe.res", unsafe.Offsetof(c.res), 8},
		{"sizeof(io_uring_params)", unsafe.Sizeof(p), 120},
		{"params.features", unsafe.Offsetof(p.features), 20},
		{"params.sq_off", unsafe.Offsetof(p.sqOff), 40},
		{"params.cq_off", unsafe.Offsetof(p.cqOff), 80},
		{"sq_off.user_addr", unsafe.Offsetof(p.sqOff.userAddr), 32},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
