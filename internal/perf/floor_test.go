package perf_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envPinger makes the test binary a pinger (see pinger) instead of running tests.
const envPinger = "WAKEBENCH_PERF_PINGER"

// pinger connects to addr and writes a 200-byte line every millisecond,
// each starting with its send time (Unix ns) taken just before the write,
// until the reader hangs up: a token stream with nothing but the socket.
func pinger(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	pad := strings.Repeat(" ", 180)
	next := time.Now()
	for {
		next = next.Add(time.Millisecond)
		time.Sleep(time.Until(next))
		if _, err := fmt.Fprintf(c, "%d%s\n", time.Now().UnixNano(), pad); err != nil {
			return 0
		}
	}
}

// BenchmarkLoopbackFloor is the floor under BenchmarkStreamOverhead/c=1:
// another process writes a stamped 200-byte line every millisecond over
// loopback TCP and this one reads it with a plain buffered read, no HTTP,
// SSE or JSON. What it measures is the kernel's and the machine's wake-up
// latency, which no client can go below.
func BenchmarkLoopbackFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	path, args := onCPU0(os.Args[0], "-test.run=^$")
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), envPinger+"="+ln.Addr().String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	var delays []float64
	for b.Loop() {
		line, err := br.ReadSlice('\n')
		now := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		sent, err := strconv.ParseInt(string(line[:19]), 10, 64)
		if err != nil {
			b.Fatalf("pinger line %q: %v", line, err)
		}
		delays = append(delays, float64(now.UnixNano()-sent)/1e3)
	}
	b.ReportMetric(percentile(delays, 50), "p50-µs")
	b.ReportMetric(percentile(delays, 99), "p99-µs")
}
