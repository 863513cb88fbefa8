// Command vllmsim is a simulated `vllm serve`: the same command line and HTTP
// API, with time and memory from a GPU and model profile. See package
// internal/vllmsim and docs/vllmsim.md.
//
//	VLLM_SERVER_DEV_MODE=1 VLLMSIM_PROFILE=l20 vllmsim serve Qwen3-1.7B --port 8001 --enable-sleep-mode
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/wakebench/wakebench/internal/vllmsim"
)

func main() {
	if os.Getenv(vllmsim.EnvWorkerRank) != "" { // a rank process of a tensor-parallel server
		os.Exit(vllmsim.Worker(os.Getenv, os.Stdin, os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := vllmsim.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
