//go:build !linux

package vllm

import (
	"context"
	"net"
	"time"
)

// dialRx is a plain dial: receive timestamps are Linux only.
func dialRx(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.DialContext
}

// received is always unknown here: token times are taken when read.
func received(net.Conn) time.Time { return time.Time{} }
