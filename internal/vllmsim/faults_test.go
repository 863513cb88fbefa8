package vllmsim

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/vllm"
)

// TestFaultHooksFireAtTheirPoint: each request fault's hook acts on its
// request and at its token only, and a Faults with nothing set never acts.
func TestFaultHooksFireAtTheirPoint(t *testing.T) {
	none := &Faults{}
	for nth := 1; nth <= 5; nth++ {
		assert.Equal(t, noFault, none.beforeCompletion(nth, true).kind)
		assert.Equal(t, noFault, none.beforeWake(nth).kind)
		for tok := 1; tok <= 4; tok++ {
			assert.Equal(t, noFault, none.onToken(nth, tok, 4).kind)
		}
	}
	assert.Equal(t, noFault, none.beforeSleep(func() bool { return true }).kind)

	f, err := ParseFaults("crash-after=2,error-status=3:503,asleep-crash,crash-mid-stream=1,truncate-stream=2,error-event=3,stall-stream=4:0.5,wake-hang=2,wake-fail=3,inflight-crash")
	require.NoError(t, err)

	a := f.beforeCompletion(2, false)
	assert.Equal(t, faultAction{kind: crash, code: 3, logLine: "ERROR injected fault crash-after=2: engine core died"}, a)
	a = f.beforeCompletion(3, false)
	assert.Equal(t, faultAction{kind: answer, code: 503, errType: http.StatusText(503), message: "injected fault error-status=3:503"}, a)
	assert.Equal(t, noFault, f.beforeCompletion(1, false).kind, "awake, no numbered fault")
	assert.Equal(t, crash, f.beforeCompletion(1, true).kind, "asleep-crash")
	assert.Equal(t, 1, f.beforeCompletion(1, true).code)

	for _, tt := range []struct {
		nth, tok int
		want     faultKind
	}{
		{1, 2, noFault}, {1, 3, crash}, {1, 4, noFault},
		{2, 2, noFault}, {2, 3, endStream},
		{3, 1, noFault}, {3, 2, errorEvent}, {3, 3, noFault},
		{4, 2, stall}, {4, 3, noFault},
		{5, 2, noFault}, {5, 3, noFault},
	} {
		assert.Equal(t, tt.want, f.onToken(tt.nth, tt.tok, 8).kind, "stream %d, token %d", tt.nth, tt.tok)
	}
	assert.Equal(t, 500*time.Millisecond, f.onToken(4, 2, 8).stallFor)
	// A stream shorter than the fault's token: the fault acts before its
	// last (issue 48: on a one-token probe it never fired).
	for _, tt := range []struct {
		nth, tok, last int
		want           faultKind
	}{
		{1, 1, 2, noFault}, {1, 2, 2, crash}, {2, 2, 2, endStream}, {2, 1, 1, endStream},
		{3, 1, 1, errorEvent}, {4, 1, 1, stall}, {3, 1, 2, noFault}, {3, 2, 2, errorEvent},
	} {
		assert.Equal(t, tt.want, f.onToken(tt.nth, tt.tok, tt.last).kind, "stream %d of %d tokens, token %d", tt.nth, tt.last, tt.tok)
	}

	assert.Equal(t, noFault, f.beforeWake(1).kind)
	assert.Equal(t, hang, f.beforeWake(2).kind)
	assert.Equal(t, answer, f.beforeWake(3).kind)
	assert.Equal(t, http.StatusInternalServerError, f.beforeWake(3).code)

	asked := false
	assert.Equal(t, noFault, f.beforeSleep(func() bool { asked = true; return false }).kind)
	assert.True(t, asked, "inflight-crash asks whether requests run")
	assert.Equal(t, crash, f.beforeSleep(func() bool { return true }).kind)
	asked = false
	none.beforeSleep(func() bool { asked = true; return true })
	assert.False(t, asked, "without the fault the engine is not asked")
}

// TestParseNewSleepFaults: the faults of the newest sleep API parse by the
// shared names, several operations each, and refuse an operation they do
// not cover.
func TestParseNewSleepFaults(t *testing.T) {
	f, err := ParseFaults("wake-stays-asleep,stuck-op=sleep,stuck-op=release_kv_cache_memory,rpc-fail=wake_up")
	require.NoError(t, err)
	assert.True(t, f.WakeStaysAsleep)
	assert.Equal(t, map[string]bool{"sleep": true, "release_kv_cache_memory": true}, f.StuckOps)
	assert.Equal(t, map[string]bool{"wake_up": true}, f.RPCFail)
	for _, bad := range []string{"stuck-op", "stuck-op=wake", "rpc-fail="} {
		_, err := ParseFaults(bad)
		assert.ErrorContains(t, err, "want one of", bad)
	}
}

// TestSlowOperation: slow=OP:S parses for the server's own operations
// only, and lies inside the engine's own timing of the operation: the
// sleep's and the wake's "It took" lines grow by at least S, a completion's
// first token by at least the prefill's S and each later token gap by
// about the decode's (the engine keeps an absolute schedule, so a gap is
// short by what the token before it was late).
func TestSlowOperation(t *testing.T) {
	f, err := ParseFaults("slow=sleep:0.2,slow=decode:0.1")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"sleep": 0.2, "decode": 0.1}, f.Slow)
	for _, bad := range []string{"slow=health:1", "slow=sleep", "slow=sleep:0", "slow=sleep:x"} {
		_, err := ParseFaults(bad)
		assert.ErrorContains(t, err, "want OP:SECONDS", bad)
	}

	const d = 0.2
	logs := &SyncLog{}
	s := startSimLog(t, "tiny-a", map[string]string{EnvFaults: fmt.Sprintf("slow=sleep:%g,slow=wake:%g,slow=prefill:%g,slow=decode:%g", d, d, d, d)}, logs)
	s.ready(t)
	ctx := t.Context()
	st, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-a", Prompt: "slow", MaxTokens: 3, IgnoreEOS: true})
	require.NoError(t, err)
	require.Len(t, st.Tokens, 3)
	assert.GreaterOrEqual(t, st.Tokens[0].Sub(st.Sent).Seconds(), d, "the prefill's S lies before the first token")
	// The engine keeps an absolute schedule (a late step is followed by a shorter one), so the
	// interval between two tokens can be short of S when the first was late; their total from
	// the request is not: the prefill's S and two later decode steps' S each.
	assert.GreaterOrEqual(t, st.Tokens[2].Sub(st.Sent).Seconds(), 3*d, "each later token waits the decode's S")
	require.NoError(t, s.c.Sleep(ctx, 1))
	require.NoError(t, s.c.WakeUp(ctx))
	e := vllm.ParseEngineLog(logs.Bytes())
	require.Len(t, e.SleepS, 1)
	require.Len(t, e.WakeS, 1)
	assert.GreaterOrEqual(t, e.SleepS[0], d, "the engine's own sleep line holds the slowed sleep")
	assert.GreaterOrEqual(t, e.WakeS[0], d, "and its wake line the slowed wake")
}

func TestParseSleepIgnored(t *testing.T) {
	f, err := ParseFaults("sleep-ignored")
	require.NoError(t, err)
	assert.Equal(t, "on", f.SleepIgnored)
	f, err = ParseFaults("sleep-ignored=paused")
	require.NoError(t, err)
	assert.Equal(t, sleepIgnoredPaused, f.SleepIgnored)
	_, err = ParseFaults("sleep-ignored=yes")
	assert.ErrorContains(t, err, `sleep-ignored: "yes": want no argument, or paused`)
}
