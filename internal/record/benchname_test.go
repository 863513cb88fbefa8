package record

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBenchName: a name's fields, its String and its split back, by hand:
// keys in order, a part without "=" (Memory/device) a value without a key,
// a value that holds "=" whole, a part that begins with "=" no key.
func TestBenchName(t *testing.T) {
	n := NewBenchName("Serve", "model", "A", "stage", "baseline", "conc", "4")
	assert.Equal(t, "Serve/model=A/stage=baseline/conc=4", n.String())
	assert.Equal(t, "model=A/stage=baseline/conc=4", n.Sub())
	assert.Equal(t, "4", n.Get("conc"))
	assert.Equal(t, "", n.Get("level"), "no such key")
	assert.Equal(t, "", n.Get(""), "a bare part is no key")
	assert.Equal(t, "Host/window=A-sleep-level1", HostWindowName("A-sleep-level1").String())
	for s, want := range map[string]BenchName{
		"Serve/model=A/stage=baseline/conc=4": n,
		"Memory/device":                       {Base: "Memory", Keys: []NameKey{{Value: "device"}}},
		"Sleep":                               {Base: "Sleep"},
		"X/k=a=b/=c":                          {Base: "X", Keys: []NameKey{{"k", "a=b"}, {"", "=c"}}},
	} {
		got := ParseBenchName(s)
		assert.Equal(t, want, got, s)
		assert.Equal(t, s, got.String(), "%s: its String is the name again", s)
	}
	assert.Equal(t, "", BenchName{Base: "Sleep"}.Sub())
}
