// Package ent holds the generated data model. Only schema/*.go, schematype and
// entc.go are written by hand; everything else is produced by `go generate ./ent`.
package ent

//go:generate go run -mod=mod entc.go
