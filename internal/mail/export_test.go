package mail

import (
	"context"
	"net"
)

// SetDial makes s dial with f, so a test reaches its loopback server under
// another host name.
func SetDial(s *SMTP, f func(ctx context.Context, network, address string) (net.Conn, error)) {
	s.dial = f
}
