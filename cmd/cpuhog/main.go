// Command cpuhog keeps every core of the machine busy, so that tests can be
// run as on a shared CI runner whose cores are taken by other jobs (make
// stress). It spins one goroutine per core at normal priority until it is
// killed, its -for time is up, or its parent process is gone, so a hog
// whose make target died never outlives it.
//
//	cpuhog [-n CORES] [-for DURATION]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "spinning goroutines (cores kept busy)")
	limit := flag.Duration("for", 2*time.Hour, "stop after this long")
	flag.Parse()
	if *n < 1 || *limit <= 0 {
		fmt.Fprintln(os.Stderr, "cpuhog: -n must be at least 1 and -for positive")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*n + 1) // the spinners, and the watcher below
	for range *n {
		go spin()
	}
	parent := os.Getppid()
	deadline := time.Now().Add(*limit)
	for time.Now().Before(deadline) && os.Getppid() == parent {
		time.Sleep(500 * time.Millisecond)
	}
}

// spin burns a core: a loop the compiler cannot remove, preemptible by the
// runtime (Go preempts tight loops asynchronously).
func spin() {
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Print("") // never taken; keeps x live
		}
	}
}
