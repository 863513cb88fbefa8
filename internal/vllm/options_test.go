package vllm

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnrecognized: argparse's refusal of a sleep option newer than the
// server names the option and the release it needs; other refused flags
// and other logs say nothing.
func TestUnrecognized(t *testing.T) {
	log := "INFO starting\nvllm: error: unrecognized arguments: --sleep-mode-offload-cudagraph --foo --enable_nccl_comm_suspend\n"
	assert.Equal(t, "--sleep-mode-offload-cudagraph is not in this vLLM (needs ≥ v0.32, vLLM #59160); --enable-nccl-comm-suspend is not in this vLLM (needs ≥ v0.30, vLLM #51485)",
		Unrecognized(log), "in the order refused")
	assert.Equal(t, "--sleep-preserve-parameter-names is not in this vLLM (needs ≥ v0.31, vLLM #57891)",
		Unrecognized("vllm serve: error: unrecognized arguments: --sleep-preserve-parameter-names=*"))
	assert.Equal(t, "--sleep-mode-offload-cudagraph is not in this vLLM (needs ≥ v0.32, vLLM #59160)",
		Unrecognized("vllm: error: unrecognized arguments: --no-sleep-mode-offload-cudagraph"))
	assert.Empty(t, Unrecognized("vllm: error: unrecognized arguments: --foo"))
	assert.Empty(t, Unrecognized("Traceback: CUDA out of memory"))
}

// TestSleepValidationNamed: vLLM ≥ 0.32 answers a bad /sleep level or mode
// with 400 and error.param (#52864); the error names the parameter and
// says the engine was not called.
func TestSleepValidationNamed(t *testing.T) {
	body := `{"error":{"message":"1 validation error: Input should be less than or equal to 2","type":"Bad Request","param":"query.level","code":400}}`
	err := ParseError(400, []byte(body))
	assert.Equal(t, "query.level", err.Param)
	assert.Contains(t, err.Error(), "HTTP 400 (query.level) Bad Request: 1 validation error")
	assert.Contains(t, err.Error(), "refused the sleep's level before calling the engine")
	older := ParseError(400, []byte(`{"error":{"message":"Invalid pause mode: x","type":"BadRequestError","param":null,"code":400}}`))
	assert.Empty(t, older.Param)
	assert.Equal(t, "HTTP 400 BadRequestError: Invalid pause mode: x", older.Error())
}
