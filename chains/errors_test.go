package chains

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMark(t *testing.T) {
	own := errors.New("adapter: insufficient balance")
	err := fmt.Errorf("%w: ERC20InsufficientBalance", Mark(own, ErrInsufficientFunds))
	require.Equal(t, "adapter: insufficient balance: ERC20InsufficientBalance", err.Error(), "the adapter's text is kept")
	require.ErrorIs(t, err, own, "the adapter's own sentinel still matches")
	require.ErrorIs(t, err, ErrInsufficientFunds)
	require.ErrorIs(t, err, ErrRefused, "short of funds is a refusal")
	require.NotErrorIs(t, err, ErrAlreadyUsed)

	require.NotErrorIs(t, ErrAlreadyUsed, ErrRefused, "a used Ref may have moved the funds")
	require.NotErrorIs(t, Mark(own, ErrRefused), ErrInsufficientFunds)
}
