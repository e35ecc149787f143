package evm

import (
	"encoding/hex"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"agentpay/chains"
)

// ValidateAddress accepts a 0x-prefixed 20-byte hex address. An all-lower or
// all-upper case address is accepted as is; a mixed-case one must carry a
// valid EIP-55 checksum, since a wrong checksum almost always means a typo.
// The zero address is refused: tokens sent there are burned.
func ValidateAddress(address string) error {
	if len(address) != 42 || !strings.HasPrefix(address, "0x") && !strings.HasPrefix(address, "0X") {
		return chains.ErrInvalidAddress
	}
	body := address[2:]
	if _, err := hex.DecodeString(body); err != nil {
		return chains.ErrInvalidAddress
	}
	addr := common.HexToAddress(address)
	if addr == (common.Address{}) {
		return chains.ErrInvalidAddress
	}
	if body != strings.ToLower(body) && body != strings.ToUpper(body) && addr.Hex()[2:] != body {
		return chains.ErrInvalidAddress
	}
	return nil
}

// parseAddress validates and decodes an address.
func parseAddress(address string) (common.Address, error) {
	if err := ValidateAddress(address); err != nil {
		return common.Address{}, err
	}
	return common.HexToAddress(address), nil
}

// NormalizeAddress is the form EVM watchers pass to Watchlist.Contains:
// "0x" followed by 40 lowercase hex digits. It does not validate.
func NormalizeAddress(address string) string {
	if strings.HasPrefix(address, "0X") {
		address = "0x" + address[2:]
	}
	return strings.ToLower(address)
}

// normalized is NormalizeAddress for a decoded address, without the
// checksum work of Address.Hex: it runs once per log in the scan loop.
func normalized(a common.Address) string {
	var buf [42]byte
	buf[0], buf[1] = '0', 'x'
	hex.Encode(buf[2:], a[:])
	return string(buf[:])
}

// Watchlist is a set of EVM addresses. Lookups are O(1), so a watcher's cost
// does not grow with the number of watched addresses.
type Watchlist struct {
	set map[string]struct{}
}

// NewWatchlist builds a watchlist; addresses may be in any case.
func NewWatchlist(addrs []string) chains.Watchlist {
	w := &Watchlist{set: make(map[string]struct{}, len(addrs))}
	for _, a := range addrs {
		w.set[NormalizeAddress(a)] = struct{}{}
	}
	return w
}

// Contains reports whether address is watched. Watchers pass the normalised
// form; other casings are accepted too, at the cost of a conversion.
func (w *Watchlist) Contains(address string) bool {
	if _, ok := w.set[address]; ok {
		return true
	}
	n := NormalizeAddress(address)
	if n == address {
		return false
	}
	_, ok := w.set[n]
	return ok
}

// Addresses lists the watched addresses in normalised form, in no order.
func (w *Watchlist) Addresses() []string {
	out := make([]string, 0, len(w.set))
	for a := range w.set {
		out = append(out, a)
	}
	return out
}
