package traffic_test

import (
	"testing"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/traffic"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { testmain.Main(m, "") }

func same(s gpu.Source) gpu.Source { return s }

// simPoolWith is a pool of vllmsim's tiny A and B (the default config
// changed by mod) whose memory source is wrapped by wrap, with its record
// and traffic phase; stopped when t ends.
func simPoolWith(t *testing.T, wrap func(gpu.Source) gpu.Source, mod func(*config.Config)) (*pool.Pool, *record.Recorder, *traffic.Phase) {
	t.Helper()
	f, rec, env := simtest.Env(t, wrap, mod)
	return f, rec, traffic.New(env, rec.Writers().Traffic)
}

func byName(cs []record.Check) map[string]record.Check {
	out := map[string]record.Check{}
	for _, c := range cs {
		out[c.Name+"/"+c.Model] = c
	}
	return out
}
