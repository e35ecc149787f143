-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_idempotency_keys" table
CREATE TABLE `new_idempotency_keys` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `scope` text NOT NULL, `key` text NOT NULL, `operation` text NOT NULL, `fingerprint` blob NOT NULL, `state` text NOT NULL DEFAULT ('in_flight'), `attempt` integer NOT NULL DEFAULT (1), `locked_until` datetime NOT NULL, `expires_at` datetime NOT NULL, `answer` text NULL, `refusal` text NULL, `transfer_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `idempotency_keys_transfers_transfer` FOREIGN KEY (`transfer_id`) REFERENCES `transfers` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "idempotency_keys" to new temporary table "new_idempotency_keys"
-- Answers kept before this release were one field per operation ({"send": ...}, {"withdrawal": ...}, {"checkout_payment": ...}) or {"error": ...}: the operation's field becomes the answer, the error the refusal
INSERT INTO `new_idempotency_keys` (`id`, `created_at`, `updated_at`, `scope`, `key`, `operation`, `fingerprint`, `state`, `attempt`, `locked_until`, `expires_at`, `transfer_id`, `answer`, `refusal`) SELECT `id`, `created_at`, `updated_at`, `scope`, `key`, `operation`, `fingerprint`, `state`, `attempt`, `locked_until`, `expires_at`, `transfer_id`,
CASE WHEN `outcome` IS NULL OR `outcome` = '' THEN NULL ELSE COALESCE(json_extract(`outcome`, '$.send'), json_extract(`outcome`, '$.withdrawal'), json_extract(`outcome`, '$.checkout_payment')) END,
CASE WHEN `outcome` IS NULL OR `outcome` = '' THEN NULL ELSE json_extract(`outcome`, '$.error') END
FROM `idempotency_keys`;
-- Drop "idempotency_keys" table after copying rows
DROP TABLE `idempotency_keys`;
-- Rename temporary table "new_idempotency_keys" to "idempotency_keys"
ALTER TABLE `new_idempotency_keys` RENAME TO `idempotency_keys`;
-- Create index "idempotencykey_scope_key" to table: "idempotency_keys"
CREATE UNIQUE INDEX `idempotencykey_scope_key` ON `idempotency_keys` (`scope`, `key`);
-- Create index "idempotencykey_expires_at" to table: "idempotency_keys"
CREATE INDEX `idempotencykey_expires_at` ON `idempotency_keys` (`expires_at`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
