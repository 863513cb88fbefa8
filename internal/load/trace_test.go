package load

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadTrace(t *testing.T) {
	lim := TraceLimits{Labels: []string{"A", "B"}, ContextTokens: 100, MaxRows: 3, MaxSpan: time.Minute}
	rows, err := ReadTrace(strings.NewReader("t_s,model,prompt_tokens,output_tokens\n0,A,20,8\n\n 0.5 , B , 30 , 8\n"), "t.csv", lim)
	require.NoError(t, err)
	assert.Equal(t, []TraceRow{{0, "A", 20, 8}, {500 * time.Millisecond, "B", 30, 8}}, rows)
	rows, err = ReadTrace(strings.NewReader("1,A,20,8"), "t.csv", lim)
	require.NoError(t, err)
	assert.Equal(t, []TraceRow{{time.Second, "A", 20, 8}}, rows, "no header")

	for name, tc := range map[string]struct{ body, want string }{
		"bad header":       {"time,model,prompt,output\n0,A,1,1\n", `t.csv:1: header "time,model,prompt,output": want "t_s,model,prompt_tokens,output_tokens"`},
		"negative time":    {"0,A,1,1\n-1,A,1,1\n", "t.csv:2: \"-1,A,1,1\": want t_s (seconds ≥ 0)"},
		"NaN time":         {"0,A,1,1\nNaN,A,1,1\n", "t.csv:2:"},
		"infinite time":    {"+Inf,A,1,1\n", "t.csv:1:"},
		"unknown label":    {"0,C,1,1\n", `t.csv:1: "0,C,1,1": want t_s (seconds ≥ 0), a model label [A B]`},
		"too few fields":   {"0,A,1\n", "t.csv:1: 3 fields"},
		"empty":            {"", "t.csv: no rows"},
		"header only":      {"t_s,model,prompt_tokens,output_tokens\n", "t.csv: no rows"},
		"beyond context":   {"0,A,90,20\n", "t.csv:1: prompt_tokens + output_tokens = 110: beyond the models' context (protocol.context_tokens 100)"},
		"too late":         {"0,A,1,1\n61,A,1,1\n", "t.csv:2: t_s 61: later than the run has time for (1m0s)"},
		"too many rows":    {"0,A,1,1\n0,A,1,1\n0,A,1,1\n0,A,1,1\n", "t.csv:4: more than 3 rows"},
		"binary junk":      {"\x00\x01\xff\xfe,A", "t.csv:1: not text"},
		"a very long line": {"0,A,1,1\n" + strings.Repeat("x", 1<<20) + "\n", "t.csv:2: a line longer than 4096 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.body), "t.csv", lim)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("a directory", func(t *testing.T) {
		d, err := os.Open(t.TempDir())
		require.NoError(t, err)
		defer d.Close()
		_, err = ReadTrace(d, "dir", lim)
		assert.ErrorContains(t, err, "is a directory")
	})
}

func TestDatasetLimits(t *testing.T) {
	body := `{"prompt": "` + strings.Repeat("word ", 20) + `", "output_tokens": 3}` + "\n" + `{"prompt": "hi", "output_tokens": 3}` + "\n"
	_, err := ReadDataset(strings.NewReader(body), "d.jsonl", DatasetLimits{ContextTokens: 20})
	assert.ErrorContains(t, err, "d.jsonl:1: about 25 prompt + 3 output tokens: beyond the models' context (protocol.context_tokens 20)")
	_, err = ReadDataset(strings.NewReader(body), "d.jsonl", DatasetLimits{ContextTokens: 100, MaxEntries: 1})
	assert.ErrorContains(t, err, "d.jsonl:2: more than 1 entries")
	s, err := ReadDataset(strings.NewReader(body), "d.jsonl", DatasetLimits{ContextTokens: 100, MaxEntries: 2})
	require.NoError(t, err)
	assert.Len(t, s, 2)
	_, err = ReadDataset(strings.NewReader(body+strings.Repeat("x", 17<<20)), "d.jsonl", DatasetLimits{})
	assert.ErrorContains(t, err, "d.jsonl:3: a line longer than 16 MiB")
}
