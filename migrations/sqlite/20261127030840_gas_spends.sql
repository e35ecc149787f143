-- Create "gas_spends" table
CREATE TABLE `gas_spends` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `mode` text NOT NULL, `tx_hash` text NOT NULL, `purpose` text NOT NULL, `fee` integer NOT NULL, `rent` integer NOT NULL DEFAULT (0), `decimals` integer NOT NULL, PRIMARY KEY (`id`));
-- Create index "gasspend_chain_tx_hash" to table: "gas_spends"
CREATE UNIQUE INDEX `gasspend_chain_tx_hash` ON `gas_spends` (`chain`, `tx_hash`);
-- Create index "gasspend_mode_chain" to table: "gas_spends"
CREATE INDEX `gasspend_mode_chain` ON `gas_spends` (`mode`, `chain`);
