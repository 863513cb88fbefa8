package vllm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// GenerateRequest is a greedy, non-streamed completion of exactly MaxTokens
// tokens that asks for the generated token ids and, with Logprobs > 0, the
// top-Logprobs log-probabilities of every token: what a correctness probe
// compares before and after a sleep.
type GenerateRequest struct {
	Model     string // the served model, or a LoRA adapter's name
	Prompt    string
	MaxTokens int
	Logprobs  int // top-k per token; 0 asks for none
}

// Generation is what one GenerateRequest returned. IDs are nil where the
// server returned no token ids (neither return_token_ids nor
// return_tokens_as_token_ids is known to it); Logprobs and Top are nil
// where it returned no logprobs.
type Generation struct {
	Text     string
	IDs      []int
	Tokens   []string             // as the server wrote them ("token_id:N" where it honoured return_tokens_as_token_ids)
	Logprobs []float64            // of each generated token
	Top      []map[string]float64 // each position's top-k, keyed as Tokens
}

// generateWire is the request body: temperature 0 (greedy), min_tokens =
// max_tokens with ignore_eos (a fixed length), return_token_ids (vLLM
// ≥ 0.10.2) and return_tokens_as_token_ids (older vLLM: ids inside the
// logprobs' token names). Fields a server does not know it ignores.
type generateWire struct {
	Model                  string  `json:"model"`
	Prompt                 string  `json:"prompt"`
	MaxTokens              int     `json:"max_tokens"`
	MinTokens              int     `json:"min_tokens"`
	IgnoreEOS              bool    `json:"ignore_eos"`
	Temperature            float64 `json:"temperature"`
	Logprobs               *int    `json:"logprobs,omitempty"`
	ReturnTokenIDs         bool    `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool    `json:"return_tokens_as_token_ids"`
	Stream                 bool    `json:"stream"`
}

// Generate sends r and parses vLLM's CompletionResponse: choices[0]'s
// text, token_ids and logprobs {tokens, token_logprobs, top_logprobs}.
func (c *Client) Generate(ctx context.Context, r GenerateRequest) (Generation, error) {
	w := generateWire{Model: r.Model, Prompt: r.Prompt, MaxTokens: r.MaxTokens, MinTokens: r.MaxTokens, IgnoreEOS: true,
		ReturnTokenIDs: true, ReturnTokensAsTokenIDs: true}
	if r.Logprobs > 0 {
		w.Logprobs = &r.Logprobs
	}
	b, err := c.call(ctx, http.MethodPost, "/v1/completions", nil, w)
	if err != nil {
		return Generation{}, err
	}
	return parseGeneration(b)
}

func parseGeneration(b []byte) (Generation, error) {
	var resp struct {
		Choices []struct {
			Text     string `json:"text"`
			TokenIDs []int  `json:"token_ids"`
			Logprobs *struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return Generation{}, fmt.Errorf("POST /v1/completions: malformed completion %.80q: %w", b, err)
	}
	if len(resp.Choices) == 0 {
		return Generation{}, fmt.Errorf("POST /v1/completions: completion without choices: %.80q", b)
	}
	ch := resp.Choices[0]
	if ch.FinishReason == "abort" {
		return Generation{}, fmt.Errorf("POST /v1/completions: request aborted by the server (finish_reason abort)")
	}
	g := Generation{Text: ch.Text, IDs: ch.TokenIDs}
	if lp := ch.Logprobs; lp != nil {
		g.Tokens, g.Top = lp.Tokens, lp.TopLogprobs
		for i, x := range lp.TokenLogprobs {
			if x == nil {
				return Generation{}, fmt.Errorf("POST /v1/completions: generated token %d has a null logprob", i+1)
			}
			g.Logprobs = append(g.Logprobs, *x)
		}
		if g.IDs == nil {
			g.IDs = tokenIDs(lp.Tokens)
		}
	}
	return g, nil
}

// tokenIDs reads ids from "token_id:N" token names; nil unless every name is one.
func tokenIDs(tokens []string) []int {
	var ids []int
	for _, t := range tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "token_id:"))
		if !strings.HasPrefix(t, "token_id:") || err != nil {
			return nil
		}
		ids = append(ids, n)
	}
	return ids
}
