package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: any bytes as a config file. Decoding and validation never
// panic, and a config that validates is one the harness can run.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"example-config.json", "demo.json", "gpu-example.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"protocol": {"concurrency": [0]}}`))
	f.Add([]byte(`{"models": [{"label": "A", "name": "m", "gpu_memory_utilization": 2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := Default()
		if err := Decode(b, &cfg); err != nil {
			return
		}
		if cfg.Validate() != nil {
			return
		}
		p := cfg.Protocol
		if len(cfg.Models) == 0 || p.Rounds < 1 || p.RequestsPerRound < 1 || p.MaxTokens < 2 || len(p.Concurrency) == 0 || !(cfg.Sim.TimeScale > 0) {
			t.Fatalf("validated an impossible config: %+v", cfg)
		}
		for _, c := range p.Concurrency {
			if c < 1 {
				t.Fatalf("validated concurrency %d", c)
			}
		}
	})
}
