package chains

import "errors"

// What a chain's answer means to the service (see the package doc).
var (
	// ErrInvalidAddress is returned when an address is not valid for a chain.
	ErrInvalidAddress = errors.New("invalid address")

	// ErrRefused: Ledger.Transfer refused the transfer before broadcasting
	// it (a bad request, a failed preflight or gas estimate): nothing was
	// sent, so nothing of it can land. A caller may fail the transfer.
	ErrRefused = errors.New("transfer refused before broadcast")

	// ErrInsufficientFunds: the source holds less USDC than the amount (or
	// no token account at all). It is always also ErrRefused.
	ErrInsufficientFunds = Mark(errors.New("insufficient USDC"), ErrRefused)

	// ErrAlreadyUsed: the chain itself refuses the transfer's Ref as used:
	// an earlier transaction with this Ref moved (or voided) the funds.
	// Nothing new was sent; look for the earlier one with FindTransfer. It is
	// not ErrRefused: the funds may well have moved.
	ErrAlreadyUsed = errors.New("transfer reference already used on chain")
)

// Mark returns an error that reads as err and also matches each of kinds
// under errors.Is (err keeps matching what it matched before). Adapters mark
// their errors with the sentinels above.
func Mark(err error, kinds ...error) error {
	return &marked{err: err, kinds: kinds}
}

type marked struct {
	err   error
	kinds []error
}

func (m *marked) Error() string { return m.err.Error() }

func (m *marked) Unwrap() []error { return append([]error{m.err}, m.kinds...) }
