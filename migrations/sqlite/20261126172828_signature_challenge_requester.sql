-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_signature_challenges" table
CREATE TABLE `new_signature_challenges` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `purpose` text NOT NULL, `nonce` text NOT NULL, `username` text NULL, `agent_id` uuid NULL, `wallet_address` text NOT NULL, `chain` text NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, `requester` text NOT NULL DEFAULT (''), PRIMARY KEY (`id`));
-- Copy rows from old table "signature_challenges" to new temporary table "new_signature_challenges"
INSERT INTO `new_signature_challenges` (`id`, `created_at`, `updated_at`, `purpose`, `nonce`, `username`, `agent_id`, `wallet_address`, `chain`, `expires_at`, `used_at`) SELECT `id`, `created_at`, `updated_at`, `purpose`, `nonce`, `username`, `agent_id`, `wallet_address`, `chain`, `expires_at`, `used_at` FROM `signature_challenges`;
-- Drop "signature_challenges" table after copying rows
DROP TABLE `signature_challenges`;
-- Rename temporary table "new_signature_challenges" to "signature_challenges"
ALTER TABLE `new_signature_challenges` RENAME TO `signature_challenges`;
-- Create index "signature_challenges_nonce_key" to table: "signature_challenges"
CREATE UNIQUE INDEX `signature_challenges_nonce_key` ON `signature_challenges` (`nonce`);
-- Create index "signaturechallenge_wallet_address_purpose" to table: "signature_challenges"
CREATE INDEX `signaturechallenge_wallet_address_purpose` ON `signature_challenges` (`wallet_address`, `purpose`);
-- Create index "signaturechallenge_wallet_address_requester_created_at" to table: "signature_challenges"
CREATE INDEX `signaturechallenge_wallet_address_requester_created_at` ON `signature_challenges` (`wallet_address`, `requester`, `created_at`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
