-- Create "idempotency_keys" table
CREATE TABLE `idempotency_keys` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `scope` text NOT NULL, `key` text NOT NULL, `operation` text NOT NULL, `fingerprint` blob NOT NULL, `state` text NOT NULL DEFAULT ('in_flight'), `attempt` integer NOT NULL DEFAULT (1), `locked_until` datetime NOT NULL, `expires_at` datetime NOT NULL, `outcome` text NULL, `transfer_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `idempotency_keys_transfers_transfer` FOREIGN KEY (`transfer_id`) REFERENCES `transfers` (`id`) ON DELETE SET NULL);
-- Create index "idempotencykey_scope_key" to table: "idempotency_keys"
CREATE UNIQUE INDEX `idempotencykey_scope_key` ON `idempotency_keys` (`scope`, `key`);
-- Create index "idempotencykey_expires_at" to table: "idempotency_keys"
CREATE INDEX `idempotencykey_expires_at` ON `idempotency_keys` (`expires_at`);
