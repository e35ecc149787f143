-- Create "fundings" table
CREATE TABLE `fundings` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `mode` text NOT NULL, `address` text NOT NULL, `amount` integer NOT NULL, `tx_hash` text NOT NULL, `source` text NOT NULL, PRIMARY KEY (`id`));
-- Create index "funding_chain_tx_hash_address" to table: "fundings"
CREATE UNIQUE INDEX `funding_chain_tx_hash_address` ON `fundings` (`chain`, `tx_hash`, `address`);
-- Create index "funding_mode_chain" to table: "fundings"
CREATE INDEX `funding_mode_chain` ON `fundings` (`mode`, `chain`);
