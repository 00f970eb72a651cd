//go:build unix

package configserver

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerGone reports whether conn's peer has closed it: a read that would not
// block finds end of file or a reset. It reads nothing: the probe peeks, so
// a byte a client sent after its request stays unread.
func peerGone(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default: // ECONNRESET and the like
			gone = true
		}
		return true // never wait for the connection to become readable
	})
	return gone || err != nil
}
