package vllm

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stampingOn waits until the kernel stamps received packets. It turns
// stamping on a moment after the first socket asks for it (when no other
// socket on the host has) and off when the last one closes: the socket
// that asks stays open until the test ends.
func stampingOn(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	keep, err := dialRx(&net.Dialer{})(t.Context(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { keep.Close() })
	peer, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { peer.Close() })
	buf := make([]byte, 8)
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := peer.Write([]byte("x"))
		require.NoError(t, err)
		_, err = keep.Read(buf)
		require.NoError(t, err)
		if !received(keep).IsZero() {
			return
		}
		require.True(t, time.Now().Before(deadline), "the kernel never stamped a received packet")
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReceiveTimeIsArrivalNotRead: data that waited in the socket while the
// client was busy keeps the time it arrived; the connection otherwise reads
// like any net.Conn (deadline, EOF).
func TestReceiveTimeIsArrivalNotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	stampingOn(t)
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

// TestCompleteUsesArrivalTimes: a stream that arrives in one write has one
// arrival time for all its tokens, though the client parses them one after
// another; stamped at read time they would all differ.
func TestCompleteUsesArrivalTimes(t *testing.T) {
	var body strings.Builder
	for range 20 {
		body.WriteString(`data: {"choices":[{"text":" w","finish_reason":null}],"usage":null}` + "\n\n")
	}
	body.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":20}}` + "\n\ndata: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", strconv.Itoa(body.Len())) // one write, no chunking
		io.WriteString(w, body.String())
	}))
	defer srv.Close()
	c := New(srv.URL)
	defer c.CloseIdle()
	stampingOn(t)
	s, err := c.Complete(t.Context(), CompletionRequest{Model: "m", Prompt: "p", MaxTokens: 20})
	require.NoError(t, err)
	require.Len(t, s.Tokens, 20)
	for i, at := range s.Tokens {
		assert.True(t, at.Equal(s.Tokens[0]), "token %d arrived with the others: %v after", i, at.Sub(s.Tokens[0]))
	}
	assert.True(t, s.Tokens[0].After(s.Sent), "and after the request was sent")
}
