-- Create "mail_messages" table
CREATE TABLE "mail_messages" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "to" character varying NOT NULL, "subject" character varying NOT NULL, "text" text NOT NULL, "html" text NOT NULL, "attempts" bigint NOT NULL DEFAULT 0, "locked_until" timestamptz NULL, "sent_at" timestamptz NULL, "failed_at" timestamptz NULL, "last_error" character varying NOT NULL DEFAULT '', "transport" character varying NOT NULL DEFAULT '', PRIMARY KEY ("id"));
-- Create index "mailmessage_to_created_at" to table: "mail_messages"
CREATE INDEX "mailmessage_to_created_at" ON "mail_messages" ("to", "created_at");
