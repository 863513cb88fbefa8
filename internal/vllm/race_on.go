//go:build race

package vllm

// raceEnabled: built with -race (see rxConn.Read).
const raceEnabled = true
