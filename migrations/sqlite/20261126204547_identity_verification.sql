-- Create "identity_callbacks" table
CREATE TABLE `identity_callbacks` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `provider` text NOT NULL, `event_id` text NOT NULL, `reference` text NOT NULL, `state` text NOT NULL, PRIMARY KEY (`id`));
-- Create index "identitycallback_provider_event_id" to table: "identity_callbacks"
CREATE UNIQUE INDEX `identitycallback_provider_event_id` ON `identity_callbacks` (`provider`, `event_id`);
-- Create "identity_verifications" table
CREATE TABLE `identity_verifications` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `provider` text NOT NULL, `reference` text NOT NULL, `state` text NOT NULL DEFAULT ('pending'), `state_at` datetime NULL, `completed_at` datetime NULL, `user_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `identity_verifications_users_identity_verifications` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Create index "identityverification_provider_reference" to table: "identity_verifications"
CREATE UNIQUE INDEX `identityverification_provider_reference` ON `identity_verifications` (`provider`, `reference`);
-- Create index "identityverification_user_id_created_at" to table: "identity_verifications"
CREATE INDEX `identityverification_user_id_created_at` ON `identity_verifications` (`user_id`, `created_at`);
