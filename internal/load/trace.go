package load

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TraceHeader is a trace's optional first line.
const TraceHeader = "t_s,model,prompt_tokens,output_tokens"

// maxTraceLine bounds one line of a trace: a row is four short fields, so
// anything longer is not a trace (a binary file, a JSON dump).
const maxTraceLine = 4 << 10

// TraceRow is one request of a trace.
type TraceRow struct {
	At                         time.Duration // since the trace's start
	Model                      string        // a model label
	PromptTokens, OutputTokens int
}

// TraceLimits are what a trace's rows may ask of the run.
type TraceLimits struct {
	Labels        []string      // the model labels a row may name
	ContextTokens int           // prompt + output tokens must fit (vLLM's --max-model-len); 0: unbounded
	MaxRows       int           // rows the run can hold (0: unbounded)
	MaxSpan       time.Duration // the latest arrival the run has time for (0: unbounded)
	// RowBytes estimates a row's memory with its results; with MaxBytes,
	// the rows together may take at most that much (0: unbounded).
	RowBytes func(promptTokens, outputTokens int) int64
	MaxBytes int64
}

// ReadTrace reads a trace (name is the file, for errors): CSV lines
// t_s,model,prompt_tokens,output_tokens, an optional TraceHeader first, the
// model a label of lim.Labels. Every error names the file, the line and
// what a line must be; a row beyond one of lim's bounds names that bound.
func ReadTrace(r io.Reader, name string, lim TraceLimits) ([]TraceRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxTraceLine)
	want := "want t_s (seconds ≥ 0), a model label " + fmt.Sprint(lim.Labels) + ", prompt_tokens ≥ 1, output_tokens ≥ 1"
	var out []TraceRow
	var bytes int64 // RowBytes of the rows so far
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			return nil, fmt.Errorf("%s:%d: not text (a CSV file of %s)", name, line, TraceHeader)
		}
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if line == 1 {
			if _, err := strconv.ParseFloat(f[0], 64); err != nil { // a header, or nothing of a trace
				if strings.Join(f, ",") != TraceHeader {
					return nil, fmt.Errorf("%s:1: header %q: want %q, or no header", name, text, TraceHeader)
				}
				continue
			}
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: %d fields in %q: %s", name, line, len(f), text, want)
		}
		t, err1 := strconv.ParseFloat(f[0], 64)
		pt, err2 := strconv.Atoi(f[2])
		ot, err3 := strconv.Atoi(f[3])
		if errors.Join(err1, err2, err3) != nil || !(t >= 0) || math.IsInf(t, 0) || pt < 1 || ot < 1 || !slices.Contains(lim.Labels, f[1]) {
			return nil, fmt.Errorf("%s:%d: %q: %s", name, line, text, want)
		}
		if lim.RowBytes != nil {
			bytes += lim.RowBytes(pt, ot)
		}
		switch {
		case lim.ContextTokens > 0 && pt+ot > lim.ContextTokens:
			return nil, fmt.Errorf("%s:%d: prompt_tokens + output_tokens = %d: beyond the models' context (protocol.context_tokens %d); the server would refuse it", name, line, pt+ot, lim.ContextTokens)
		case lim.MaxSpan > 0 && t > lim.MaxSpan.Seconds(): // in seconds: a huge t_s would overflow a Duration
			return nil, fmt.Errorf("%s:%d: t_s %g: later than the run has time for (%v)", name, line, t, lim.MaxSpan)
		case lim.MaxRows > 0 && len(out) == lim.MaxRows:
			return nil, fmt.Errorf("%s:%d: more than %d rows, the most one run holds in memory", name, line, lim.MaxRows)
		case lim.MaxBytes > 0 && bytes > lim.MaxBytes:
			return nil, fmt.Errorf("%s:%d: the rows so far hold about %.1f GiB with their results: at most %.1f GiB in one run", name, line, float64(bytes)/(1<<30), float64(lim.MaxBytes)/(1<<30))
		}
		at := time.Duration(t * float64(time.Second))
		out = append(out, TraceRow{At: at, Model: f[1], PromptTokens: pt, OutputTokens: ot})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: a line longer than %d bytes: not a trace row (%s)", name, line+1, maxTraceLine, TraceHeader)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rows (want lines of %s)", name, TraceHeader)
	}
	return out, nil
}
