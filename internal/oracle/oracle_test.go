package oracle

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/vllm"
)

func TestCompare(t *testing.T) {
	ref := vllm.Generation{Text: " a b c", IDs: []int{1, 2, 3}, Tokens: []string{"token_id:1", "token_id:2", "token_id:3"},
		Logprobs: []float64{-0.1, -0.2, -0.3},
		Top: []map[string]float64{
			{"token_id:1": -0.1, "token_id:7": -2},
			{"token_id:2": -0.2, "token_id:8": -0.21}, // a near-tie: 8 is 0.01 nats behind
			{"token_id:3": -0.3, "token_id:9": -1}}}
	with := func(f func(g *vllm.Generation)) vllm.Generation {
		g := ref
		g.IDs, g.Logprobs, g.Tokens = append([]int(nil), ref.IDs...), append([]float64(nil), ref.Logprobs...), append([]string(nil), ref.Tokens...)
		f(&g)
		return g
	}
	for name, tc := range map[string]struct {
		got  vllm.Generation
		want Result
	}{
		"identical": {ref, Result{Match: true}},
		"logprobs within tolerance": {with(func(g *vllm.Generation) { g.Logprobs[2] = -0.32 }),
			Result{Match: true, MaxDelta: 0.02}},
		"another token": {with(func(g *vllm.Generation) { g.IDs[2], g.Tokens[2], g.Logprobs[2] = 9, "token_id:9", -1 }),
			Result{Position: 3, Kind: KindToken, Detail: "token 3 is id 9 (logprob -1.0000), reference id 3 (logprob -0.3000)"}},
		"the other side of a near-tie": {with(func(g *vllm.Generation) { g.IDs[1], g.Tokens[1], g.IDs[2] = 8, "token_id:8", 4 }),
			Result{Match: true, Tie: 2, MaxDelta: 0.01}}, // the replay's -0.2 for id 8, the reference's -0.21
		"the other side of a near-tie, at another logprob": {with(func(g *vllm.Generation) { g.IDs[1], g.Tokens[1], g.Logprobs[1] = 8, "token_id:8", -0.4 }),
			Result{Position: 2, Kind: KindToken, Detail: "token 2 is id 8 (logprob -0.4000), reference id 2 (logprob -0.2000)"}},
		"a token outside the reference's top-k": {with(func(g *vllm.Generation) { g.IDs[0], g.Tokens[0] = 5, "token_id:5" }),
			Result{Position: 1, Kind: KindToken, Detail: "token 1 is id 5 (logprob -0.1000), reference id 1 (logprob -0.1000)"}},
		"drifted logprobs, the same tokens": {with(func(g *vllm.Generation) {
			for i := range g.Logprobs {
				g.Logprobs[i] -= 0.3
			}
		}), Result{Position: 1, Kind: KindLogprob, MaxDelta: 0.3,
			Detail: "token 1 (id 1) has logprob -0.4000, reference -0.1000 (|Δ| 0.3000 > tolerance 0.05)"}},
		"shorter": {with(func(g *vllm.Generation) { g.IDs, g.Logprobs, g.Tokens = g.IDs[:2], g.Logprobs[:2], g.Tokens[:2] }),
			Result{Position: 3, Kind: KindLength, Detail: "2 tokens, reference 3"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := Compare(ref, tc.got, 0.05)
			assert.InDelta(t, tc.want.MaxDelta, got.MaxDelta, 1e-9)
			got.MaxDelta, tc.want.MaxDelta = 0, 0
			assert.Equal(t, tc.want, got)
		})
	}

	// Without ids (an old server, no logprobs): the text decides.
	a, b := vllm.Generation{Text: " the model wakes"}, vllm.Generation{Text: " the model sleeps"}
	assert.True(t, Compare(a, a, 0).Match)
	r := Compare(a, b, 0)
	assert.False(t, r.Match)
	assert.Equal(t, KindText, r.Kind)
	assert.Contains(t, r.Detail, `from byte 12: "sleeps", reference "wakes"`)

	assert.Equal(t, BasisLogprobs, Basis(ref))
	assert.Equal(t, BasisIDs, Basis(vllm.Generation{IDs: []int{1}}))
	assert.Equal(t, BasisText, Basis(a))
}

// TestCompareStopsAtTheFirstDivergence: the case. A replay whose
// first logprob drifted 0.4 nats (the FP8-KV-scale failure) and that later
// takes the other side of a reference near-tie is the drift at token 1, not
// a tie; nor does a later token outside the top-k move the divergence.
func TestCompareStopsAtTheFirstDivergence(t *testing.T) {
	ref := vllm.Generation{IDs: []int{1, 2, 3}, Tokens: []string{"token_id:1", "token_id:2", "token_id:3"},
		Logprobs: []float64{-0.1, -0.2, -0.3},
		Top: []map[string]float64{
			{"token_id:1": -0.1, "token_id:7": -2},
			{"token_id:2": -0.2, "token_id:8": -1},
			{"token_id:3": -0.3, "token_id:9": -0.31}}} // 9 is 0.01 nats behind 3
	replay := func(id int, lp float64) vllm.Generation {
		return vllm.Generation{IDs: []int{1, 2, id}, Tokens: []string{"token_id:1", "token_id:2", "token_id:" + strconv.Itoa(id)},
			Logprobs: []float64{-0.5, -0.2, lp}}
	}
	drift := Result{Position: 1, Kind: KindLogprob, MaxDelta: 0.4,
		Detail: "token 1 (id 1) has logprob -0.5000, reference -0.1000 (|Δ| 0.4000 > tolerance 0.05)"}
	for name, got := range map[string]vllm.Generation{
		"then the near-tie's other side": replay(9, -0.31),
		"then a token outside the top-k": replay(5, -0.31),
	} {
		t.Run(name, func(t *testing.T) {
			r := Compare(ref, got, 0.05)
			assert.InDelta(t, drift.MaxDelta, r.MaxDelta, 1e-9)
			r.MaxDelta = drift.MaxDelta
			assert.Equal(t, drift, r)
		})
	}
	// Without the drift the same near-tie is a tie: numerics, not corruption.
	clean := replay(9, -0.3)
	clean.Logprobs[0] = -0.1
	r := Compare(ref, clean, 0.05)
	assert.True(t, r.Match)
	assert.Equal(t, 3, r.Tie)
	assert.Zero(t, r.Position)
}

func TestSet(t *testing.T) {
	ps := Set("m", []string{"chat", "sql"})
	var names, models []string
	for _, p := range ps {
		names, models = append(names, p.Name), append(models, p.Model)
	}
	assert.Equal(t, []string{"short", "long", "lora:chat", "lora:sql"}, names)
	assert.Equal(t, []string{"m", "m", "chat", "sql"}, models, "an adapter's probe goes through the adapter")
}
