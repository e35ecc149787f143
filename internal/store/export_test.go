package store

// SchemaMigrationsTable is schemaMigrationsTable, for the external tests.
const SchemaMigrationsTable = schemaMigrationsTable
