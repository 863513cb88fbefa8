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

// textFunc returns the i-th token's text for a prompt: plausible words while
// the weights are valid; after a level-2 wake without reload_weights the
// weights are uninitialised and every token is "!", as real vLLM outputs.
func textFunc(prompt string, valid bool) func(int) string {
	if !valid {
		return func(int) string { return "!" }
	}
	h := fnv.New64a()
	h.Write([]byte(prompt))
	seed := h.Sum64()
	return func(i int) string {
		x := seed + uint64(i)*0x9E3779B97F4A7C15
		x ^= x >> 31
		return " " + vocab[x%uint64(len(vocab))]
	}
}
