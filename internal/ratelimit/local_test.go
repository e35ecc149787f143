package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSlots(t *testing.T) {
	s := NewSlots[string](2)
	r1, ok := s.Acquire("a")
	require.True(t, ok)
	r2, ok := s.Acquire("a")
	require.True(t, ok)
	_, ok = s.Acquire("a")
	require.False(t, ok, "a holds both its slots")
	_, ok = s.Acquire("b")
	require.True(t, ok, "b has its own")
	r1()
	r1() // twice gives back one slot, once
	r3, ok := s.Acquire("a")
	require.True(t, ok)
	_, ok = s.Acquire("a")
	require.False(t, ok)
	r2()
	r3()
	require.NotContains(t, s.held, "a", "nothing kept for a key holding nothing")
}
