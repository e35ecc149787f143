-- Create "card_requests" table
CREATE TABLE `card_requests` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `amount` integer NOT NULL, `merchant_name` text NOT NULL, `description` text NOT NULL DEFAULT (''), `status` text NOT NULL DEFAULT ('pending_approval'), `expires_at` datetime NOT NULL, `decided_at` datetime NULL, `error` text NULL, `reserve_transfer_id` uuid NULL, `issuer` text NULL, `card_reference` text NULL, `card_token` text NULL, `card_last4` text NULL, `card_sealed` blob NULL, `card_expires_at` datetime NULL, `card_revealed_at` datetime NULL, `charged_amount` integer NULL, `charged_merchant` text NULL, `charged_at` datetime NULL, `refund_amount` integer NOT NULL DEFAULT (0), `refund_chain` text NULL, `refund_to` text NULL, `refund_tx_hash` text NULL, `refund_sent_at` datetime NULL, `refunded_at` datetime NULL, `idempotency_key` text NULL, `fingerprint` blob NULL, `agent_id` uuid NOT NULL, `user_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `card_requests_agents_card_requests` FOREIGN KEY (`agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `card_requests_users_card_requests` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Create index "cardrequest_agent_id_created_at" to table: "card_requests"
CREATE INDEX `cardrequest_agent_id_created_at` ON `card_requests` (`agent_id`, `created_at`);
-- Create index "cardrequest_user_id_created_at" to table: "card_requests"
CREATE INDEX `cardrequest_user_id_created_at` ON `card_requests` (`user_id`, `created_at`);
-- Create index "cardrequest_status_expires_at" to table: "card_requests"
CREATE INDEX `cardrequest_status_expires_at` ON `card_requests` (`status`, `expires_at`);
-- Create index "cardrequest_card_token" to table: "card_requests"
CREATE UNIQUE INDEX `cardrequest_card_token` ON `card_requests` (`card_token`);
-- Create index "cardrequest_agent_id_idempotency_key" to table: "card_requests"
CREATE UNIQUE INDEX `cardrequest_agent_id_idempotency_key` ON `card_requests` (`agent_id`, `idempotency_key`);
