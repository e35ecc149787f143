package graph

import (
	"fmt"
	"math/big"
	"strings"

	"agentpay"
	"agentpay/graph/model"
)

// booksModel shows the books (agentpay's books.go) in GraphQL's shape.
// Base units travel as BaseUnits (64 bits); a sum beyond it, which no USDC
// supply reaches, is an error rather than a wrong number.
func booksModel(b *agentpay.Books) (*model.Books, error) {
	out := &model.Books{Balanced: true, Chains: []*model.BooksChain{}}
	if err := b.Err(); err != nil {
		msg := err.Error()
		out.Balanced, out.Error = false, &msg
	}
	var bad error
	units := func(x *big.Int) int64 {
		if !x.IsInt64() {
			bad = fmt.Errorf("books: %s base units do not fit 64 bits", x)
			return 0
		}
		return x.Int64()
	}
	record := func(r agentpay.BooksRecord) *model.BooksRecord {
		return &model.BooksRecord{Kind: model.BooksRecordKind(strings.ToUpper(r.Kind)), ID: r.ID, Amount: r.Amount, Detail: r.Status, InFlight: r.InFlight}
	}
	for _, c := range b.Chains {
		mc := &model.BooksChain{Chain: string(c.Chain), Mode: modeModel(c.Mode), Decimals: int(c.Decimals), Lines: []*model.BooksLine{}}
		for _, l := range c.Lines {
			ml := &model.BooksLine{Holder: model.BooksHolder(strings.ToUpper(string(l.Holder))), Addresses: l.Addresses,
				OnChain: units(l.OnChain), Records: units(l.Records), Difference: units(l.Difference()),
				Differences: []*model.BooksDifference{}, InFlight: []*model.BooksRecord{}}
			for _, d := range l.Differences {
				md := &model.BooksDifference{Address: d.Address, OnChain: units(d.OnChain), Records: units(d.Records)}
				if d.Owner != "" {
					owner := d.Owner
					md.Owner = &owner
				}
				if d.Explained != nil {
					md.ExplainedBy = record(*d.Explained)
				}
				ml.Differences = append(ml.Differences, md)
			}
			for _, r := range l.InFlight {
				ml.InFlight = append(ml.InFlight, record(r))
			}
			mc.Lines = append(mc.Lines, ml)
		}
		out.Chains = append(out.Chains, mc)
	}
	return out, bad
}
