package vllm

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rxConn is a TCP connection whose reads keep the kernel's receive time of
// the data they return (SO_TIMESTAMPNS). Token times taken from it do not
// include how long the client took to be scheduled and read: at high
// concurrency the last of a step's 256 chunks would otherwise carry the
// time the client spent on the other 255 (docs/overhead.md).
//
// Linux stamps received packets only while some socket on the host asks
// for it, and turns stamping on asynchronously when the first one does:
// data that arrives in that moment carries no time and is stamped when
// read, as without this connection type.
type rxConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	oob  []byte
	last atomic.Int64 // Unix ns of the last read's data, 0 when unknown
}

// dialRx dials like d and turns on receive timestamps; a connection on
// which they cannot be turned on is returned as it is.
func dialRx(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			return c, nil
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		}); err != nil || serr != nil {
			return c, nil
		}
		return &rxConn{TCPConn: tc, raw: raw, oob: make([]byte, unix.CmsgSpace(16))}, nil
	}
}

// Read is recvmsg with the timestamp control message; it keeps the
// semantics of net.Conn.Read (deadlines, io.EOF at the end).
func (c *rxConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for { // as poll.FD.Read: an interrupted call is retried at once (the poller is edge-triggered)
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob, 0)
			if rerr != unix.EINTR {
				break
			}
		}
		if raceEnabled && rerr == nil {
			// syscall.Read tells the race detector that what the peer
			// wrote before sending happened before this read; recvmsg
			// does not. A zero-length read does, and reads nothing.
			_, _ = syscall.Read(int(fd), nil)
		}
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.last.Store(rxTime(c.oob[:oobn]))
	return n, nil
}

// rxTime is the SCM_TIMESTAMPNS time in the control messages, 0 if none.
func rxTime(oob []byte) int64 {
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		switch len(data) {
		case 16: // struct timespec, 64-bit
			return int64(binary.NativeEndian.Uint64(data))*1e9 + int64(binary.NativeEndian.Uint64(data[8:]))
		case 8: // 32-bit
			return int64(int32(binary.NativeEndian.Uint32(data)))*1e9 + int64(int32(binary.NativeEndian.Uint32(data[4:])))
		}
	}
	return 0
}

// received is when the data last read from conn reached this host's
// socket, or the zero time when conn cannot tell.
func received(conn net.Conn) time.Time {
	if c, ok := conn.(*rxConn); ok {
		if ns := c.last.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
	}
	return time.Time{}
}
