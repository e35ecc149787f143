-- Create "mail_messages" table
CREATE TABLE `mail_messages` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `to` text NOT NULL, `subject` text NOT NULL, `text` text NOT NULL, `html` text NOT NULL, `attempts` integer NOT NULL DEFAULT (0), `locked_until` datetime NULL, `sent_at` datetime NULL, `failed_at` datetime NULL, `last_error` text NOT NULL DEFAULT (''), `transport` text NOT NULL DEFAULT (''), PRIMARY KEY (`id`));
-- Create index "mailmessage_to_created_at" to table: "mail_messages"
CREATE INDEX `mailmessage_to_created_at` ON `mail_messages` (`to`, `created_at`);
