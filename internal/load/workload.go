package load

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Length kinds of a workload.
const (
	Fixed   = "fixed"   // every request the same prompt and output lengths
	Uniform = "uniform" // lengths drawn uniformly between a minimum and a maximum
	Dataset = "dataset" // prompts and output lengths from a dataset file
)

// Sample is one dataset entry.
type Sample struct {
	Prompt       string
	OutputTokens int
}

// Workload makes the requests of an open-loop load: prompt and output
// lengths (fixed, uniform or from a dataset), an optional prefix shared
// by every prompt, from a seed. Prompts of N tokens are N common English
// words (about a token each in BPE vocabularies); output lengths are
// exact (max_tokens = min_tokens with ignore_eos).
type Workload struct {
	Kind                             string
	PromptTokens, OutputTokens       int // fixed; uniform: the maxima
	MinPromptTokens, MinOutputTokens int // uniform: the minima
	Samples                          []Sample
	SharedPrefixTokens               int // words every prompt starts with
	Seed                             uint64
}

var promptWords = strings.Fields(`time person year way day thing man world life hand part child eye woman place work week case point
government company number group problem fact water room mother area money story month lot right study book job word business issue
side kind head house service friend father power hour game line end member law car city community name president team minute idea
kid body information back parent face others level office door health art war history party result change morning reason research
girl guy moment air teacher force education`)

func words(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = promptWords[r.IntN(len(promptWords))]
	}
	return strings.Join(w, " ")
}

// Requests makes n requests for model: the i-th is the same for a seed.
func (w Workload) Requests(model string, n int) ([]vllm.CompletionRequest, error) {
	r := rand.New(rand.NewPCG(w.Seed, 1))
	prefix := ""
	if w.SharedPrefixTokens > 0 {
		prefix = words(rand.New(rand.NewPCG(w.Seed, 2)), w.SharedPrefixTokens) + " "
	}
	between := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	out := make([]vllm.CompletionRequest, n)
	for i := range out {
		var prompt string
		var tokens int
		switch w.Kind {
		case Fixed:
			prompt, tokens = words(r, w.PromptTokens), w.OutputTokens
		case Uniform:
			if w.MinPromptTokens > w.PromptTokens || w.MinOutputTokens > w.OutputTokens || w.MinOutputTokens < 1 || w.MinPromptTokens < 1 {
				return nil, fmt.Errorf("uniform lengths: want 1 ≤ min ≤ max, got prompt %d–%d, output %d–%d", w.MinPromptTokens, w.PromptTokens, w.MinOutputTokens, w.OutputTokens)
			}
			prompt, tokens = words(r, between(w.MinPromptTokens, w.PromptTokens)), between(w.MinOutputTokens, w.OutputTokens)
		case Dataset:
			if len(w.Samples) == 0 {
				return nil, errors.New("dataset workload without samples")
			}
			s := w.Samples[r.IntN(len(w.Samples))]
			prompt, tokens = s.Prompt, s.OutputTokens
		default:
			return nil, fmt.Errorf("workload %q: want %q, %q or %q", w.Kind, Fixed, Uniform, Dataset)
		}
		if tokens < 1 {
			return nil, fmt.Errorf("request %d: %d output tokens: want at least 1", i, tokens)
		}
		out[i] = vllm.CompletionRequest{Model: model, Prompt: prefix + prompt, MaxTokens: tokens, IgnoreEOS: true}
	}
	return out, nil
}

// DatasetLimits are what a dataset's entries may ask of the run.
type DatasetLimits struct {
	// ContextTokens: an entry's prompt (estimated) plus its output tokens
	// must fit (vLLM's --max-model-len); 0: unbounded.
	ContextTokens int
	MaxEntries    int // entries the run can hold (0: unbounded)
}

// maxDatasetLine bounds one line of a dataset (a conversation with a long
// document in it fits; a file with no newlines does not).
const maxDatasetLine = 16 << 20

// ReadDataset reads a JSONL dataset, one entry a line, either
// {"prompt": "…", "output_tokens": N} or a ShareGPT conversation
// {"conversations": [{"from": "human", "value": "…"}, {"from": "gpt", "value": "…"}]}
// whose first human turn is the prompt and whose first reply after it
// gives the output length (its characters / 4, rounded up: about a BPE
// token per 4 characters of English; a prompt's tokens are estimated the
// same way). A bad line, or one beyond lim, is an error naming it.
func ReadDataset(r io.Reader, name string, lim DatasetLimits) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), maxDatasetLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var e struct {
			Prompt        *string `json:"prompt"`
			OutputTokens  int     `json:"output_tokens"`
			Conversations []turn  `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		var s Sample
		switch {
		case e.Prompt != nil:
			if *e.Prompt == "" || e.OutputTokens < 1 {
				return nil, fmt.Errorf("%s:%d: want a non-empty prompt and output_tokens ≥ 1", name, line)
			}
			s = Sample{Prompt: *e.Prompt, OutputTokens: e.OutputTokens}
		case len(e.Conversations) > 0:
			var ok bool
			if s, ok = conversation(e.Conversations); !ok {
				return nil, fmt.Errorf("%s:%d: a conversation needs a human turn followed by a gpt reply", name, line)
			}
		default:
			return nil, fmt.Errorf(`%s:%d: want {"prompt", "output_tokens"} or {"conversations": […]}`, name, line)
		}
		if n := estimateTokens(s.Prompt) + s.OutputTokens; lim.ContextTokens > 0 && n > lim.ContextTokens {
			return nil, fmt.Errorf("%s:%d: about %d prompt + %d output tokens: beyond the models' context (protocol.context_tokens %d); the server would refuse it",
				name, line, estimateTokens(s.Prompt), s.OutputTokens, lim.ContextTokens)
		}
		if lim.MaxEntries > 0 && len(out) == lim.MaxEntries {
			return nil, fmt.Errorf("%s:%d: more than %d entries, the most one run holds in memory", name, line, lim.MaxEntries)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: a line longer than %d MiB: not one JSON entry a line", name, line+1, maxDatasetLine>>20)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no entries", name)
	}
	return out, nil
}

// estimateTokens is about how many BPE tokens text is: a token per 4
// characters of English.
func estimateTokens(text string) int { return (len(text) + 3) / 4 }

// turn is one turn of a ShareGPT conversation.
type turn struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

// conversation is the sample of a conversation's first human turn and the
// reply after it.
func conversation(turns []turn) (Sample, bool) {
	for i := 0; i+1 < len(turns); i++ {
		if turns[i].From == "human" && turns[i].Value != "" && turns[i+1].From == "gpt" && turns[i+1].Value != "" {
			return Sample{Prompt: turns[i].Value, OutputTokens: estimateTokens(turns[i+1].Value)}, true
		}
	}
	return Sample{}, false
}
