package load

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllm"
)

func TestArrivalOffsets(t *testing.T) {
	c, err := Arrivals{Process: Constant, Rate: 4}.Offsets(3)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond}, c)

	// Mean gap 1/rate; coefficient of variation 1/√shape (1 for Poisson).
	for _, a := range []Arrivals{{Process: Poisson, Rate: 100, Seed: 7}, {Process: Gamma, Rate: 100, Burstiness: 0.25, Seed: 7}, {Process: Gamma, Rate: 100, Burstiness: 4, Seed: 7}} {
		offs, err := a.Offsets(20001)
		require.NoError(t, err)
		var sum, sq float64
		for i := 1; i < len(offs); i++ {
			g := (offs[i] - offs[i-1]).Seconds()
			sum, sq = sum+g, sq+g*g
		}
		n := float64(len(offs) - 1)
		mean := sum / n
		cv := math.Sqrt(sq/n-mean*mean) / mean
		shape := a.Burstiness
		if a.Process == Poisson {
			shape = 1
		}
		assert.InDelta(t, 0.01, mean, 0.0003, "%+v: mean gap", a)
		assert.InDelta(t, 1/math.Sqrt(shape), cv, 0.05/math.Sqrt(shape), "%+v: burstiness", a)
		again, _ := a.Offsets(20001)
		assert.Equal(t, offs, again, "the same seed, the same arrivals")
	}
	for _, bad := range []Arrivals{{Process: Poisson}, {Process: "uniform", Rate: 1}, {Process: Gamma, Rate: 1, Burstiness: -1}, {Process: Constant, Rate: math.Inf(1)}} {
		_, err := bad.Offsets(1)
		assert.Error(t, err, "%+v", bad)
	}
}

// slowSender answers after delay with tokens spaced gap apart and records
// how many requests it held at once. With hold set, it answers none before
// holdFor requests have been sent to it: a sender that waited for an answer
// before its next send would never get one.
type slowSender struct {
	delay, gap time.Duration
	tokens     int
	fail       string        // model whose requests fail
	hold       chan struct{} // nil: no hold; closed once holdFor requests were sent
	holdFor    int
	mu         sync.Mutex // guards inflight, peak, sent
	inflight   int
	peak       int
	sent       int
}

func (s *slowSender) Send(ctx context.Context, a Arrival) (Delivery, error) {
	s.mu.Lock()
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	s.sent++
	if s.hold != nil && s.sent == s.holdFor {
		close(s.hold)
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inflight--; s.mu.Unlock() }()
	now := time.Now()
	st := &vllm.Stream{Sent: now, PromptTokens: 5}
	if a.Model == s.fail {
		return Delivery{st, now, false}, errors.New("boom")
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return Delivery{st, now, false}, ctx.Err()
		}
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return Delivery{st, now, false}, ctx.Err()
	}
	t := time.Now()
	for range s.tokens {
		st.Tokens = append(st.Tokens, t)
		t = t.Add(s.gap)
	}
	st.OutputTokens, st.FinishReason = s.tokens, "length"
	return Delivery{st, now, a.Model == "A" && a.At == 0}, nil
}

// TestRunOpenDoesNotWaitForAnswers: 20 requests every 10 ms to a server
// that answers none of them before all 20 were sent (then each after
// 100 ms) are all sent, every one before the first answer: a closed loop
// would wait for an answer that never comes, and its requests would time
// out. Ordered, not timed: a busy machine that stalls the sends for 200 ms
// (it did, in CI's make stress) changes nothing here.
func TestRunOpenDoesNotWaitForAnswers(t *testing.T) {
	s := &slowSender{delay: 100 * time.Millisecond, gap: 2 * time.Millisecond, tokens: 4, fail: "B", hold: make(chan struct{}), holdFor: 20}
	offs, err := Arrivals{Process: Constant, Rate: 100}.Offsets(20)
	require.NoError(t, err)
	var arrivals []Arrival
	for i, at := range offs {
		m := "A"
		if i == 7 {
			m = "B"
		}
		arrivals = append(arrivals, Arrival{At: at, Model: m})
	}
	out := RunOpen(t.Context(), s, arrivals, 10*time.Second)
	require.Len(t, out, 20)
	// Every request but the failed one was in flight at once.
	assert.GreaterOrEqual(t, s.peak, 19, "open loop: requests overlap")
	firstAnswer := time.Time{}
	for _, o := range out {
		if o.Err == nil && (firstAnswer.IsZero() || o.Issued.Add(o.TTFT()).Before(firstAnswer)) {
			firstAnswer = o.Issued.Add(o.TTFT())
		}
	}
	require.False(t, firstAnswer.IsZero(), "some request was answered")
	for i, o := range out {
		assert.Equal(t, i, o.Index)
		assert.Equal(t, i == 0, o.Waited, "the sender's word on waiting is kept")
		assert.True(t, o.Issued.Before(firstAnswer), "request %d sent before the first answer, not after one", i)
		assert.False(t, o.Issued.Before(o.Planned), "request %d not sent before its time", i)
		if o.Model == "B" {
			assert.Error(t, o.Err)
			assert.Zero(t, o.E2E())
			continue
		}
		require.NoError(t, o.Err)
		assert.Equal(t, 4, o.OutputTokens)
		assert.Len(t, o.ITL, 3)
		assert.Equal(t, 2*time.Millisecond, o.ITL[0])
		assert.True(t, o.HasTPOT)
		assert.Greater(t, o.TTFT(), 90*time.Millisecond)
		assert.Equal(t, o.TTFT()+6*time.Millisecond, o.E2E(), "E2E: issued → last token")
		assert.True(t, SLO{TTFT: time.Second, TPOT: 10 * time.Millisecond}.Good(o))
		assert.False(t, SLO{TTFT: 50 * time.Millisecond}.Good(o), "TTFT over its SLO")
		assert.False(t, SLO{TPOT: time.Millisecond}.Good(o), "TPOT over its SLO")
	}
}

func TestRunOpenStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	s := &slowSender{delay: time.Millisecond, tokens: 1}
	arrivals := []Arrival{{At: 0, Model: "A"}, {At: 10 * time.Second, Model: "A"}, {At: 11 * time.Second, Model: "A"}}
	out := RunOpen(ctx, s, arrivals, time.Second)
	require.NoError(t, out[0].Err)
	for _, o := range out[1:] {
		assert.ErrorContains(t, o.Err, "not sent")
		assert.Equal(t, "A", o.Model)
	}
}

func TestMerge(t *testing.T) {
	a := []Arrival{{At: 0, Model: "A"}, {At: 20, Model: "A"}}
	b := []Arrival{{At: 10, Model: "B"}, {At: 20, Model: "B"}}
	var got []string
	for _, x := range Merge(a, b) {
		got = append(got, x.Model)
	}
	assert.Equal(t, []string{"A", "B", "A", "B"}, got, "by time, ties in argument order")
}

func TestWorkload(t *testing.T) {
	fixed, err := Workload{Kind: Fixed, PromptTokens: 12, OutputTokens: 5, SharedPrefixTokens: 4, Seed: 1}.Requests("m", 3)
	require.NoError(t, err)
	prefix := strings.Join(strings.Fields(fixed[0].Prompt)[:4], " ")
	for _, r := range fixed {
		assert.Len(t, strings.Fields(r.Prompt), 16, "4 shared + 12 words")
		assert.True(t, strings.HasPrefix(r.Prompt, prefix+" "), "the shared prefix")
		assert.Equal(t, vllm.CompletionRequest{Model: "m", Prompt: r.Prompt, MaxTokens: 5, IgnoreEOS: true}, r)
	}
	assert.NotEqual(t, fixed[0].Prompt, fixed[1].Prompt, "the rest differs")
	again, _ := Workload{Kind: Fixed, PromptTokens: 12, OutputTokens: 5, SharedPrefixTokens: 4, Seed: 1}.Requests("m", 3)
	assert.Equal(t, fixed, again, "a seed gives the same requests")

	uni, err := Workload{Kind: Uniform, MinPromptTokens: 2, PromptTokens: 6, MinOutputTokens: 3, OutputTokens: 9, Seed: 2}.Requests("m", 200)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, r := range uni {
		n := len(strings.Fields(r.Prompt))
		assert.True(t, n >= 2 && n <= 6, n)
		assert.True(t, r.MaxTokens >= 3 && r.MaxTokens <= 9, r.MaxTokens)
		seen[r.MaxTokens] = true
	}
	assert.Len(t, seen, 7, "every output length in 3…9 drawn")
	_, err = Workload{Kind: Uniform, MinPromptTokens: 7, PromptTokens: 6, MinOutputTokens: 1, OutputTokens: 2}.Requests("m", 1)
	assert.ErrorContains(t, err, "want 1 ≤ min ≤ max")

	f, err := os.Open(filepath.Join("..", "..", "testdata", "traffic-sharegpt.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	samples, err := ReadDataset(f, "traffic-sharegpt.jsonl", DatasetLimits{})
	require.NoError(t, err)
	assert.Len(t, samples, 48, "the shipped dataset")
	ds, err := Workload{Kind: Dataset, Samples: samples, Seed: 3}.Requests("m", 10)
	require.NoError(t, err)
	for _, r := range ds {
		assert.NotEmpty(t, r.Prompt)
		assert.Positive(t, r.MaxTokens)
	}

	s, err := ReadDataset(strings.NewReader(`{"prompt": "hi", "output_tokens": 3}
{"conversations": [{"from": "system", "value": "x"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "123456789"}]}
`), "d.jsonl", DatasetLimits{})
	require.NoError(t, err)
	assert.Equal(t, []Sample{{"hi", 3}, {"q", 3}}, s, "9 characters of reply ≈ 3 tokens")
	for body, want := range map[string]string{
		"{\"prompt\": \"\", \"output_tokens\": 3}\n": "d.jsonl:1: want a non-empty prompt",
		"\n{\"x\": 1}\n": "d.jsonl:2: want",
		"{\"conversations\": [{\"from\": \"gpt\", \"value\": \"a\"}]}": "a human turn followed by a gpt reply",
		"not json": "d.jsonl:1:",
		"":         "no entries",
	} {
		_, err := ReadDataset(strings.NewReader(body), "d.jsonl", DatasetLimits{})
		assert.ErrorContains(t, err, want, body)
	}
}

// gatedSender counts the requests inside Send and holds each until the
// count has once reached hold, so the peak shows how many a bound lets in
// at once, by ordering, not by timing.
type gatedSender struct {
	hold int
	mu   sync.Mutex // guards in, peak
	in   int
	peak int
	open chan struct{} // closed when in first reaches hold
	once sync.Once
}

func (g *gatedSender) Send(ctx context.Context, a Arrival) (Delivery, error) {
	g.mu.Lock()
	g.in++
	g.peak = max(g.peak, g.in)
	if g.in >= g.hold {
		g.once.Do(func() { close(g.open) })
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.in--
	g.mu.Unlock()
	now := time.Now()
	return Delivery{Stream: &vllm.Stream{Sent: now, Tokens: []time.Time{now}, OutputTokens: 1}, Dispatched: now}, nil
}

// TestRunOpenBoundedHoldsItsBound: 50 arrivals at once with at most 5 in
// flight: 5 are sent together (the sender holds them until the fifth
// arrives) and never a sixth, and every request is still served; unbounded,
// all 50 are in the sender at once (a file each: what ran a 2,000 req/s
// ideal run out of open files).
func TestRunOpenBoundedHoldsItsBound(t *testing.T) {
	arrivals := make([]Arrival, 50)
	for i := range arrivals {
		arrivals[i] = Arrival{Model: "A"}
	}
	g := &gatedSender{hold: 5, open: make(chan struct{})}
	out := RunOpenBounded(t.Context(), g, arrivals, 10*time.Second, 5)
	for _, o := range out {
		require.NoError(t, o.Err)
	}
	assert.Equal(t, 5, g.peak, "at most the bound in flight, and the bound reached")

	g = &gatedSender{hold: 50, open: make(chan struct{})}
	out = RunOpen(t.Context(), g, arrivals, 10*time.Second)
	for _, o := range out {
		require.NoError(t, o.Err)
	}
	assert.Equal(t, 50, g.peak, "unbounded: every arrival in flight at once")
}
