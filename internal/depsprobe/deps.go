// Package depsprobe pins the project's dependencies until real code imports them.
package depsprobe

import (
	_ "entgo.io/contrib/entgql"
	_ "entgo.io/ent"
	_ "entgo.io/ent/dialect/sql/schema"
	_ "entgo.io/ent/entc"
	_ "github.com/99designs/gqlgen/graphql/handler"
	_ "github.com/99designs/gqlgen/api"
	_ "github.com/vektah/gqlparser/v2"
	_ "github.com/ethereum/go-ethereum/ethclient"
	_ "github.com/ethereum/go-ethereum/ethclient/simulated"
	_ "github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	_ "github.com/gagliardetto/solana-go"
	_ "github.com/gagliardetto/solana-go/rpc"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/gorilla/websocket"
	_ "github.com/lib/pq"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riverdatabasesql"
	_ "github.com/riverqueue/river/riverdriver/riversqlite"
	_ "github.com/riverqueue/river/rivermigrate"
	_ "github.com/shopspring/decimal"
	_ "github.com/stretchr/testify/require"
	_ "github.com/google/uuid"
	_ "modernc.org/sqlite"
	_ "github.com/getkin/kin-openapi/openapi3"
)
