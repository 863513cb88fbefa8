package vllmsim

import (
	"crypto/sha256"
	"strings"
	"sync"
	"unicode"
)

// blockSize is vLLM's default KV-cache block size in tokens
// (CacheConfig.block_size 16 on CUDA): prefix caching hits whole blocks.
const blockSize = 16

// prefixCache is vLLM's automatic prefix caching as a request's answer
// and prefill time show it: a prompt's longest prefix of whole blocks
// whose keys and values are still in the KV cache is not computed again
// (vLLM V1 hashes each full block with the hash of the blocks before it,
// vllm/v1/core/kv_cache_utils.py hash_block_tokens), and at least the
// prompt's last token always is. Whatever drops the KV cache drops it: a
// sleep of level ≥ 1, a KV-only release, a pause that clears the cache,
// a successful /reset_prefix_cache.
type prefixCache struct {
	on bool // --enable-prefix-caching (vLLM V1's default) and not --no-enable-prefix-caching

	mu     sync.Mutex        // guards blocks
	blocks map[[32]byte]bool // the chained hash of every cached block
}

// tokens splits s as countTokens counts it: a token per started 4 letters
// of a word, one per punctuation mark.
func tokens(s string) []string {
	var out []string
	for _, w := range strings.Fields(s) {
		var run []rune
		flush := func() {
			for len(run) > 0 {
				n := min(4, len(run))
				out = append(out, string(run[:n]))
				run = run[n:]
			}
		}
		for _, r := range w {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				run = append(run, r)
				continue
			}
			out = append(out, string(r))
		}
		flush()
	}
	return out
}

// chain is the hash of each whole block of prompt through adapter ("" for
// the base model), each over the one before it: a LoRA adapter's blocks are
// its own (vLLM's block hash carries the request's LoRA name as extra keys:
// vllm/v1/core/kv_cache_utils.py _gen_lora_extra_hash_keys; its LoRA int
// id in earlier releases).
func chain(prompt, adapter string) [][32]byte {
	toks := tokens(prompt)
	var hs [][32]byte
	prev := sha256.Sum256([]byte(adapter))
	for i := 0; i+blockSize <= len(toks); i += blockSize {
		h := sha256.New()
		h.Write(prev[:])
		h.Write([]byte(strings.Join(toks[i:i+blockSize], "\x00")))
		copy(prev[:], h.Sum(nil))
		hs = append(hs, prev)
	}
	return hs
}

// hit is how many of prompt's n tokens the cache holds: whole blocks, at
// most n − 1 (the last token is computed again to sample from).
func (p *prefixCache) hit(prompt, adapter string, n int) int {
	if p == nil || !p.on {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	blocks := 0
	for _, h := range chain(prompt, adapter) {
		if !p.blocks[h] {
			break
		}
		blocks++
	}
	return min(blocks*blockSize, (max(n-1, 0)/blockSize)*blockSize)
}

// add caches prompt's whole blocks (its prefill computed them).
func (p *prefixCache) add(prompt, adapter string) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocks == nil {
		p.blocks = map[[32]byte]bool{}
	}
	for _, h := range chain(prompt, adapter) {
		p.blocks[h] = true
	}
}

// clear drops every cached block.
func (p *prefixCache) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocks = nil
}
