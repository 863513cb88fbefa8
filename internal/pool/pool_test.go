package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGarbage(t *testing.T) {
	assert.True(t, garbage("!!!!!!!!"))
	assert.True(t, garbage(" ! ! ! !"))
	assert.False(t, garbage("!!!"), "too short to tell")
	assert.False(t, garbage(" the model wakes"))
}
