package vllmsim

import (
	"hash/fnv"
	"strings"
	"unicode"
)

var vocab = strings.Fields(`the model wakes from sleep and serves tokens while its weights return over
the bus to memory on the device where a cache of keys and values grows with every step of decoding
so that each new request finds the engine ready again after a short pause measured in seconds by
a careful harness that records time memory throughput latency and every sample it takes`)

// countTokens approximates a BPE tokenizer: one token per started 4 letters
// of a word, one per punctuation mark. Deterministic, so prompt_tokens is stable.
func countTokens(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		letters := 0
		for _, r := range w {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				letters++
				continue
			}
			n++ // punctuation
		}
		n += (letters + 3) / 4
	}
	return n
}

// words is vocab without repeats: a token's id is its index here.
var words = func() []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range vocab {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}()

// garbageID is the id of "!", what uninitialised weights emit.
var garbageID = len(words)

// poisonID and poisonText are the token weights filled with 0xFF emit
// (VLLM_POISON_DISCARDED_PAGES=1: vLLM fills discarded pages with 0xFF on
// wake, RFC #48310; vllm-api.md §10): ÿ is byte 0xFF in Latin-1. Distinct
// from "!" so a reader tells a poisoned level-2 wake from an unpoisoned one.
var poisonID = len(words) + 1

const poisonText = "ÿ"

// genToken is one generated token: its id, text and log-probability.
type genToken struct {
	id      int
	text    string
	logprob float64
}

// generator is a model's greedy output for one request: a pure function of
// the prompt (and the LoRA adapter it goes through), so the same request
// before and after a sleep must give the same tokens and logprobs unless a
// fault corrupts them.
type generator struct {
	seed   uint64
	valid  bool // false: weights uninitialised (level-2 wake without reload): every token "!"
	poison bool // with !valid: the weights are 0xFF (poisoned pages): every token poisonText
	// divergeFrom > 0: from this (1-based) token on, another token than the
	// model's greedy one (fault diverge-after-wake).
	divergeFrom int
	drift       float64 // subtracted from every logprob (fault logprob-drift)
	// flipTie: at the first near-tie the runner-up wins, and what follows
	// is the continuation of that other token (tie-flip-after-wake).
	flipTie bool
}

// newGenerator is the generator of prompt through adapter ("" for the base model).
func newGenerator(prompt, adapter string, valid bool) generator {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	if adapter != "" {
		h.Write([]byte{0})
		h.Write([]byte(adapter))
	}
	return generator{seed: h.Sum64(), valid: valid}
}

// mix is a SplitMix64 step of seed and i.
func mix(seed uint64, i int) uint64 {
	x := seed + uint64(i+1)*0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// Salts of the near-tie draw and of the continuation after a flipped tie.
const (
	tieSalt  = 0x243F6A8885A308D3
	flipSalt = 0x13198A2E03707344
)

// TieMargin is the most nats a near-tie's runner-up is below the greedy
// token: within the oracle's default logprob_tolerance (0.05), so a
// replay that takes the runner-up is a tie, not a mismatch.
const TieMargin = 0.025

// nearTie reports whether position i of seed is a near-tie (about one
// token in eight): the runner-up's logprob is margin nats, in
// [0.005, TieMargin), below the greedy token's. Real models have them
// (two nearly equal candidates), and a greedy replay may take either:
// vLLM's output depends on the batch it runs in unless
// VLLM_BATCH_INVARIANT=1 (vLLM docs/features/batch_invariance.md).
func nearTie(seed uint64, i int) (tie bool, margin float64) {
	y := mix(seed^tieSalt, i)
	return y%8 == 0, 0.005 + float64((y>>8)%20)/1000
}

// maxTieScan bounds the search for the first near-tie (a request's
// max_tokens is far below it).
const maxTieScan = 1 << 16

// firstTie is the 0-based position of seed's first near-tie, −1 if none.
func firstTie(seed uint64) int {
	for i := range maxTieScan {
		if t, _ := nearTie(seed, i); t {
			return i
		}
	}
	return -1
}

// token is the i-th (0-based) generated token.
func (g generator) token(i int) genToken { return g.top(i, 1)[0] }

// top is the k most likely tokens at position i, the generated one first;
// the runner-up is at least 0.5 nats less likely, or at a near-tie less
// than TieMargin, and the others 0.7 nats apart.
func (g generator) top(i, k int) []genToken {
	if !g.valid && g.poison {
		return []genToken{{id: poisonID, text: poisonText, logprob: 0}}
	}
	if !g.valid {
		return []genToken{{id: garbageID, text: "!", logprob: 0}}
	}
	seed, flip := g.seed, -1
	if g.flipTie {
		flip = firstTie(seed)
		if flip >= 0 && i > flip {
			seed = mix(seed^flipSalt, flip) // another token before: another continuation
		}
	}
	x := mix(seed, i)
	v := uint64(len(words))
	id := x % v
	if g.divergeFrom > 0 && i+1 >= g.divergeFrom {
		id = (id + 1 + mix(^g.seed, i)%(v-1)) % v // any other word
	}
	// The greedy token's logprob, in [-1.05, -0.05] nats.
	lp := -0.05 - float64((x>>32)%1000)/1000 - g.drift
	tie, margin := nearTie(seed, i)
	out := []genToken{{id: int(id), text: " " + words[id], logprob: lp}}
	for j := 1; j < max(k, 2) && j < len(words); j++ {
		a := (int(id) + j) % len(words)
		alp := lp - 0.5 - 0.7*float64(j-1)
		if j == 1 && tie {
			alp = lp - margin
		}
		out = append(out, genToken{id: a, text: " " + words[a], logprob: alp})
	}
	if i == flip { // the runner-up wins: the two trade places, each keeping its rank's logprob
		out[0].id, out[0].text, out[1].id, out[1].text = out[1].id, out[1].text, out[0].id, out[0].text
	}
	return out[:min(k, len(out))]
}
