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
	seed  uint64
	valid bool // false: weights uninitialised (level-2 wake without reload): every token "!"
	// divergeFrom > 0: from this (1-based) token on, another token than the
	// model's greedy one (fault diverge-after-wake).
	divergeFrom int
	drift       float64 // subtracted from every logprob (fault logprob-drift)
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

// token is the i-th (0-based) generated token.
func (g generator) token(i int) genToken {
	if !g.valid {
		return genToken{id: garbageID, text: "!", logprob: 0}
	}
	x := mix(g.seed, i)
	v := uint64(len(words))
	id := x % v
	if g.divergeFrom > 0 && i+1 >= g.divergeFrom {
		id = (id + 1 + mix(^g.seed, i)%(v-1)) % v // any other word
	}
	// The greedy token's logprob, in [-1.05, -0.05] nats.
	lp := -0.05 - float64((x>>32)%1000)/1000
	return genToken{id: int(id), text: " " + words[id], logprob: lp - g.drift}
}

// top is the k most likely tokens at position i, the generated one first;
// the others are each at least 0.5 nats less likely.
func (g generator) top(i, k int) []genToken {
	t := g.token(i)
	out := []genToken{t}
	if !g.valid {
		return out
	}
	v := len(words)
	for j := 1; j < k && j < v; j++ {
		id := (t.id + j) % v
		out = append(out, genToken{id: id, text: " " + words[id], logprob: t.logprob - 0.5 - 0.7*float64(j-1)})
	}
	return out
}
