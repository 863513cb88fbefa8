package vllm

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReceiveTimeIsArrivalNotRead: data that waited in the socket while the
// client was busy keeps the time it arrived; the connection otherwise reads
// like any net.Conn (deadline, EOF).
func TestReceiveTimeIsArrivalNotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	// The kernel turns packet stamping on a moment after the first socket
	// asks for it (when no other socket on the host has): ask first, wait.
	keep, err := dialRx(&net.Dialer{})(t.Context(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer keep.Close()
	first, err := ln.Accept()
	require.NoError(t, err)
	first.Close()
	time.Sleep(20 * time.Millisecond)
	sent, dialed := make(chan time.Time, 1), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(sent)
			return
		}
		defer c.Close()
		<-dialed // data that arrives before the option is set carries no time
		at := time.Now()
		c.Write([]byte("first"))
		sent <- at // after the write: the client's 50 ms start once the data is on its way
		time.Sleep(100 * time.Millisecond)
	}()
	conn, err := dialRx(&net.Dialer{})(t.Context(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.IsType(t, &rxConn{}, conn, "timestamps are on for TCP")
	close(dialed)
	at := <-sent
	time.Sleep(50 * time.Millisecond) // the client is busy; the data waits in the socket
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	readAt := time.Now()
	require.NoError(t, err)
	assert.Equal(t, "first", string(buf[:n]))
	rx := received(conn)
	require.False(t, rx.IsZero(), "the kernel stamped the data")
	assert.False(t, rx.Before(at.Add(-time.Millisecond)), "arrived after it was sent (%v before)", at.Sub(rx))
	assert.Less(t, rx, readAt.Add(-40*time.Millisecond), "arrival, not the late read: %v before the read", readAt.Sub(rx))
	assert.Equal(t, rx, receiveTime(conn), "token times use the arrival")

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err = conn.Read(buf)
	assert.True(t, errors.Is(err, os.ErrDeadlineExceeded), "deadline: %v", err)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	_, err = conn.Read(buf)
	assert.ErrorIs(t, err, io.EOF, "peer closed")
	assert.Zero(t, rxTime(nil), "no control message, no time")
}
