//go:build !unix

package configserver

import "net"

// peerGone cannot tell on this platform: a held request whose client went
// away keeps its slot until its wait ends.
func peerGone(net.Conn) bool { return false }
