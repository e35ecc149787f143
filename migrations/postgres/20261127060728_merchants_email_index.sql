-- Modify "merchants" table
ALTER TABLE "merchants" ADD COLUMN "email_normalized" character varying NOT NULL DEFAULT '';
-- Create index "merchant_email_normalized" to table: "merchants"
CREATE INDEX "merchant_email_normalized" ON "merchants" ("email_normalized");
-- Backfill: the rows written before the column get their lookup key (merchantEmailKey)
UPDATE merchants SET email_normalized = lower(email);
